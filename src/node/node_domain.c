/* node_domain.c — domains on the parent side: allocation of a domain's
 * windows in the reserved address space, the two control phases every
 * member chip answers (open and zero my window; attach the peers after the
 * allocation barrier), the orchestrator's own view of the windows (window
 * tensors, reads; under mpirun a domain with a chip on another host than
 * rank 0 has MPI RMA windows, of which rank 0 maps chip 0's only), and the
 * release of every domain at the end of a run. */
#include <stdio.h>
#include <string.h>

#include "common/options.h"
#include "node/node_internal.h"

#define NODE_SPACE_ALIGN (2u << 20)

typedef struct ctl_wait {
  const int *slots;
  int k;
} ctl_wait;

static bool slots_idle(pto_node *n, void *arg) {
  ctl_wait *w = arg;
  for (int i = 0; i < w->k; i++)
    if (n->child[w->slots[i]].gen) return false;
  return true;
}

/* Posts one control frame per chip and waits for every reply. */
static int control(pto_node *n, const int *slots, int k, frame_type type,
                   const comm_domain_desc *d) {
  static node_frame f;
  ctl_wait w = {slots, k};
  int rc = node_until(n, slots_idle, &w, false, UINT64_MAX, 0);
  if (rc) return rc;
  for (int i = 0; i < k; i++) {
    memset(&f, 0, sizeof f);
    f.type = type;
    f.dom = *d;
    f.dom_rank = i;
    node_post(n, slots[i], &f, -1);
  }
  rc = node_until(n, slots_idle, &w, false, UINT64_MAX, 0);
  if (rc) return rc;
  for (int i = 0; i < k; i++) {
    const child_slot *c = &n->child[slots[i]];
    if (!c->reply.status) continue;
    if (type != FRAME_DOM_CLOSE) /* the chip's own words: the backend's reason (an MPI error) */
      node_first_err(n, c->reply.status, "node orchestration: domain_create: chip %d%s%s: %s",
                     slots[i], c->where[0] ? ", " : "", c->where,
                     c->reply.err.details[0] ? c->reply.err.details
                                             : pto_strerror(c->reply.status));
    return c->reply.status;
  }
  return 0;
}

/* Releases live domain i: its chips close it (unless the node failed), the
 * observer's view goes, its named objects are unlinked. A node that failed
 * (before or during the close) released it already in node_kill_all, which
 * first stops the chip threads of this process that may wait on it: then
 * nothing is left to do here. */
static void release_domain(pto_node *n, int i) {
  comm_domain_desc *d = &n->doms[i];
  if (n->dom_live[i] && !n->fatal) control(n, d->chips, d->nranks, FRAME_DOM_CLOSE, d);
  if (!n->dom_live[i]) return;
  comm_domain_close(&n->observer, d->id, false);
  comm_shm_unlink(d, -1);
  n->dom_live[i] = false;
}

static bool chips_idle_for_domain(pto_node *n, void *arg) {
  ctl_wait *w = arg;
  for (int i = 0; i < w->k; i++) {
    if (n->child[w->slots[i]].gen) return false;
    n->reserved[w->slots[i]] = true;
  }
  return true;
}

/* A refused creation fails the run naming why (node_refuse). */
static int domain_create(pto_node_orch *no, const int *chips, int nranks,
                         const pto_window_buffer *buffers, int nbuffers, pto_domain *out) {
  pto_node *n = no ? no->node : NULL;
#define WHY(code, ...) return node_refuse(n, (code), "domain_create", __VA_ARGS__)
  if (!n) return PTO_EINVAL;
  if (!chips) WHY(PTO_EINVAL, "chips is NULL");
  if (!out) WHY(PTO_EINVAL, "out is NULL");
  if (nranks < 1 || nranks > PTO_COMM_MAX_RANKS)
    WHY(PTO_EINVAL, "%d ranks: 1..%d", nranks, PTO_COMM_MAX_RANKS);
  if (n->fatal) return n->fatal;
  for (int i = 0; i < nranks; i++) {
    if (chips[i] < 0 || chips[i] >= n->cfg.nchips)
      WHY(PTO_EINVAL, "chips[%d] is %d: the node's chips are 0..%d", i, chips[i],
          n->cfg.nchips - 1);
    for (int j = 0; j < i; j++)
      if (chips[i] == chips[j])
        WHY(PTO_EINVAL, "chip %d is named twice (chips[%d], chips[%d])", chips[i], j, i);
  }
  /* a chip on another host than rank 0 cannot map a POSIX shared-memory
   * window of rank 0's host: such a domain gets MPI RMA windows, as every
   * domain of two ranks or more does under mpirun with
   * PTO_MPI_SHARED_WINDOWS=0. A domain of one chip on rank 0's host shares
   * its window with no other rank: it gets the shared-memory backend's
   * plain memory (which rank 0's orchestrator maps, as it maps every
   * window), since Open MPI makes no RMA window of one process on one host
   * (osc/rdma has no RDMA to itself; osc/pt2pt refuses
   * MPI_THREAD_MULTIPLE): MPI_Win_create failed with PTO_EMPI. */
  bool across = n->mpi && !pto_option(PTO_OPT_MPI_SHARED_WINDOWS) && nranks > 1;
  for (int i = 0; n->mpi && i < nranks; i++)
    across = across || (n->child[chips[i]].kind == SLOT_RANK && n->child[chips[i]].other_host);
  int slot = -1;
  for (int i = 0; i < COMM_MAX_DOMAINS && slot < 0; i++)
    if (!n->dom_live[i]) slot = i;
  if (slot < 0)
    WHY(PTO_EINVAL,
        "%d domains are live already, the most a run has (they are released at "
        "its end)",
        COMM_MAX_DOMAINS);
  comm_domain_desc *d = &n->doms[slot];
  memset(d, 0, sizeof *d);
  char why[200];
  int rc = comm_desc_layout_why(d, buffers, nbuffers, why, sizeof why);
  if (rc) WHY(rc, "%s", why);
  d->id = n->next_dom++;
  d->nranks = nranks;
  d->backend = across ? COMM_BACKEND_MPI : COMM_BACKEND_SHM;
  memcpy(d->chips, chips, sizeof(int) * (size_t)nranks);
  uint64_t at = (n->space_used + NODE_SPACE_ALIGN - 1) / NODE_SPACE_ALIGN * NODE_SPACE_ALIGN, end;
  if (__builtin_mul_overflow(d->win_bytes, (uint64_t)nranks, &end) ||
      __builtin_add_overflow(at, end, &end) || end > n->cfg.window_space)
    WHY(PTO_ENOMEM,
        "%d windows of %llu bytes do not fit the node's window space (%llu bytes, "
        "%llu in use; pto_node_config.window_space)",
        nranks, (unsigned long long)d->win_bytes, (unsigned long long)n->cfg.window_space,
        (unsigned long long)n->space_used);
  /* the same address in every process of the node (under mpirun every
   * rank reserved the window space at rank 0's address): the MPI backend
   * creates rank r's RMA window on its slot here too */
  d->base = (uint64_t)(uintptr_t)n->space + at;
  snprintf(d->prefix, sizeof d->prefix, "%s.d%d", n->prefix, d->id);
  d->wait_timeout_ms = n->cfg.wait_timeout_ms;
  d->fault_inject = n->cfg.fault_inject;
  d->fault_seed = node_sched_fault_seed(n, n->cfg.fault_seed);
  d->controlled = n->sched != NULL;
  d->run_index = node_sched_dom_index(n, d->id);
  /* the member chips finish what they run; nothing new is dispatched to
   * them meanwhile (chips_idle_for_domain reserves them) */
  ctl_wait w = {chips, nranks};
  rc = node_until(n, chips_idle_for_domain, &w, true, UINT64_MAX, 0);
  if (rc) return rc;
  n->dom_live[slot] = true; /* from here on, cleanup unlinks its objects */
  n->space_used = end;
  /* phase 1: every rank creates and zeroes its window; all replies = the
   * allocation barrier; phase 2: every rank maps its peers. control()
   * posts to every member before it waits for any: the MPI backend's
   * creation is collective over the members (MPI_Comm_create_group,
   * MPI_Win_create), and so is its attach (MPI_Win_lock_all + barrier) */
  rc = control(n, chips, nranks, FRAME_DOM_OPEN, d);
  if (!rc) rc = control(n, chips, nranks, FRAME_DOM_ATTACH, d);
  if (!rc) {
    rc = comm_domain_open(&n->observer, d, -1);
    if (!rc) rc = comm_domain_attach(&n->observer, d->id);
  }
  if (rc) {
    release_domain(n, slot);
    return rc;
  }
  *out = d->id;
  return 0;
#undef WHY
}

int pto_node_domain_create(pto_node_orch *no, const int *chips, int nranks,
                           const pto_window_buffer *buffers, int nbuffers, pto_domain *out) {
  if (!no || node_orch_foreign(no, "domain_create")) return PTO_EINVAL;
  /* a failure past the checks (a wait, a control frame) named generically */
  return node_latch(no->node, domain_create(no, chips, nranks, buffers, nbuffers, out),
                    "domain_create");
}

int pto_node_window_tensor(pto_node_orch *no, pto_domain dom, int rank, const char *name,
                           pto_dtype dt, int ndims, const int64_t *shape, pto_tensor *out) {
  if (!no || node_orch_foreign(no, "window_tensor")) return PTO_EINVAL;
  char why[300];
  int rc = comm_window_tensor_why(&no->node->observer, dom, rank, name, dt, ndims, shape, out, why,
                                  sizeof why);
  /* an orchestration-side error fails the run, as a bad submit does: a
   * caller that skips this code gets a failed run, not unwritten outputs */
  return rc ? node_refuse(no->node, rc, "window_tensor", "%s", why) : 0;
}

void node_release_domains(pto_node *n) {
  for (int i = 0; i < COMM_MAX_DOMAINS; i++)
    if (n->dom_live[i]) release_domain(n, i);
  n->space_used = 0;
}
