/* pto/pto.h — umbrella header. */
#ifndef PTO_PTO_H
#define PTO_PTO_H
#include "pto/chip.h"
#include "pto/graph.h"
#include "pto/kernel.h"
#include "pto/orch.h"
#include "pto/redux.h"
#include "pto/status.h"
#include "pto/tensor.h"
#include "pto/version.h"
#endif
