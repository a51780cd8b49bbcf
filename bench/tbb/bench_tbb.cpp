/* bench/tbb/bench_tbb.cpp — the workloads as oneTBB flow graphs: one
 * continue_node per task and one explicit edge per dependency, so there is
 * no dependency inference at all; this bounds the cost of pure scheduling.
 *
 * tbb::global_control caps the pool at `workers` threads, the thread that
 * waits for the graph included.
 *
 * Dynamic class: the clock covers building the graph (nodes + edges, the
 * analogue of submission in the other systems) and running it; it stops
 * at wait_for_all's return, before the graph is destroyed (no other
 * system's clock covers a teardown).
 * Prebuilt class: the graph is built once, and an execution puts a message
 * to its sources and waits for all: a continue_node counts its
 * predecessors' messages afresh after each firing, so the same graph runs
 * again with no reset. */
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/version.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <vector>

#include "bench.h"

using tbb::flow::continue_msg;
using node_t = tbb::flow::continue_node<continue_msg>;

static int g_workers;
static char g_desc[160];
static std::unique_ptr<tbb::global_control> g_control;

static int tbb_init(int workers) {
  g_workers = workers;
  g_control.reset(
      new tbb::global_control(tbb::global_control::max_allowed_parallelism, (size_t)workers));
  return 0;
}

static void tbb_fini(void) { g_control.reset(); }

static const char *tbb_describe(void) {
  std::snprintf(g_desc, sizeof(g_desc),
                "%d threads (incl. the waiting thread), oneTBB %d.%d flow graph, continue_node "
                "per task",
                g_workers, TBB_VERSION_MAJOR, TBB_VERSION_MINOR);
  return g_desc;
}

/* A workload as a flow graph: one continue_node per task, one edge per
 * dependency, and the nodes an execution starts from. */
struct flow {
  tbb::flow::graph g;
  std::deque<node_t> nodes; /* a deque: nodes never move as it grows */
  std::vector<node_t *> sources;
};

static void build_chain(flow &f, int n, uint64_t *slots) {
  for (int i = 0; i < n; i++) {
    f.nodes.emplace_back(f.g, [slots](const continue_msg &) { bench_kernel_empty(slots); });
    if (i > 0) tbb::flow::make_edge(f.nodes[i - 1], f.nodes[i]);
  }
  f.sources.push_back(&f.nodes[0]);
}

/* start_now: each task starts as soon as it exists (it has no edges), so
 * the dynamic class overlaps building with running, as submission does in
 * the other systems. */
static void build_indep(flow &f, int n, uint64_t *slots, bool start_now) {
  for (int i = 0; i < n; i++) {
    uint64_t *s = slots + (size_t)i * BENCH_SLOT_WORDS;
    f.nodes.emplace_back(f.g, [s](const continue_msg &) { bench_kernel_empty(s); });
    if (start_now)
      f.nodes.back().try_put(continue_msg());
    else
      f.sources.push_back(&f.nodes.back());
  }
}

static void build_fanout(flow &f, int rounds, uint64_t *slots) {
  uint64_t *r = slots, *a = slots + BENCH_SLOT_WORDS, *b = slots + 2 * BENCH_SLOT_WORDS;
  node_t *prev = nullptr;
  for (int k = 0; k < rounds; k++) {
    f.nodes.emplace_back(f.g, [r, a](const continue_msg &) { bench_kernel_produce(r, a); });
    node_t &prod = f.nodes.back();
    if (prev) tbb::flow::make_edge(*prev, prod);
    size_t first = f.nodes.size();
    for (int j = 0; j < BENCH_FAN; j++) {
      uint64_t *bj = b + (size_t)j * BENCH_SLOT_WORDS;
      f.nodes.emplace_back(f.g, [a, bj](const continue_msg &) { bench_kernel_consume(a, bj); });
      tbb::flow::make_edge(prod, f.nodes.back());
    }
    f.nodes.emplace_back(f.g, [b, r](const continue_msg &) { bench_kernel_reduce(b, r); });
    node_t &red = f.nodes.back();
    for (int j = 0; j < BENCH_FAN; j++)
      tbb::flow::make_edge(f.nodes[first + j], red);
    prev = &red;
  }
  f.sources.push_back(&f.nodes[0]);
}

/* The sources start once the whole graph exists: a node that has already
 * fired would not see edges added to it later. */
static void build_graph(flow &f, const bench_graph *bg, uint64_t *slots) {
  for (int i = 0; i < bg->ntasks; i++) {
    f.nodes.emplace_back(f.g,
                         [bg, i, slots](const continue_msg &) { bench_graph_task(bg, i, slots); });
    for (int j = bg->dep_start[i]; j < bg->dep_start[i + 1]; j++)
      tbb::flow::make_edge(f.nodes[bg->dep[j]], f.nodes.back());
  }
  for (int i = 0; i < bg->ntasks; i++)
    if (bg->dep_start[i] == bg->dep_start[i + 1]) f.sources.push_back(&f.nodes[i]);
}

static void build(flow &f, const bench_work &w, bool start_now) {
  switch (w.kind) {
  case BENCH_CHAIN: build_chain(f, w.n, w.slots); break;
  case BENCH_INDEP: build_indep(f, w.n, w.slots, start_now); break;
  case BENCH_FANOUT: build_fanout(f, w.n, w.slots); break;
  case BENCH_GRAPH: build_graph(f, w.g, w.slots); break;
  }
}

static void execute(flow &f) {
  for (node_t *s : f.sources)
    s->try_put(continue_msg());
  f.g.wait_for_all();
}

/* Dynamic class: build + run timed; the graph's destruction is not. */
static int64_t dynamic(const bench_work &w) {
  int64_t t0 = bench_now_ns();
  std::unique_ptr<flow> f(new flow);
  build(*f, w, true);
  execute(*f);
  int64_t ns = bench_now_ns() - t0;
  f.reset();
  return ns;
}

static int64_t tbb_chain(int n, uint64_t *slots) {
  return dynamic(bench_work{BENCH_CHAIN, n, nullptr, slots});
}

static int64_t tbb_indep(int n, uint64_t *slots) {
  return dynamic(bench_work{BENCH_INDEP, n, nullptr, slots});
}

static int64_t tbb_fanout(int rounds, uint64_t *slots) {
  return dynamic(bench_work{BENCH_FANOUT, rounds, nullptr, slots});
}

static int64_t tbb_graph(const bench_graph *g, uint64_t *slots) {
  return dynamic(bench_work{BENCH_GRAPH, 0, g, slots});
}

/* ---- prebuilt class ---- */

static void *pre_build(const bench_work *w) {
  flow *f = new flow;
  build(*f, *w, false);
  return f;
}

static int pre_exec(void *graph) {
  execute(*static_cast<flow *>(graph));
  return 0;
}

static void pre_destroy(void *graph) { delete static_cast<flow *>(graph); }

static const bench_prebuilt tbb_prebuilt = {
    "flow graph built once (nodes + edges), each execution puts to its sources and waits for all",
    pre_build, pre_exec, pre_destroy};

int main(int argc, char **argv) {
  bench_system sys = {};
  sys.name = "tbb";
  sys.init = tbb_init;
  sys.fini = tbb_fini;
  sys.run_chain = tbb_chain;
  sys.run_indep = tbb_indep;
  sys.run_fanout = tbb_fanout;
  sys.run_graph = tbb_graph;
  sys.describe = tbb_describe;
  sys.prebuilt = &tbb_prebuilt;
  return bench_main(argc, argv, &sys);
}
