/* node_create.h — the dist tests' node: pto_node_create that prints why it
 * failed and fails the test (include after cmocka.h). */
#ifndef PTO_TEST_NODE_CREATE_H
#define PTO_TEST_NODE_CREATE_H

#include <stdio.h>

#include "pto/node.h"

static inline pto_node *node_create_ok(const pto_node_config *cfg) {
  pto_node *n = NULL;
  pto_error_info err;
  int rc = pto_node_create(cfg, &n, &err);
  if (rc) fprintf(stderr, "node create: %s: %s\n", pto_status_name(rc), err.details);
  assert_int_equal(rc, 0);
  return n;
}

#endif
