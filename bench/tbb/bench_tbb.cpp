/* bench/tbb/bench_tbb.cpp — the workloads as oneTBB flow graphs: one
 * continue_node per task and one explicit edge per dependency, so there is
 * no dependency inference at all; this bounds the cost of pure scheduling.
 *
 * tbb::global_control caps the pool at `workers` threads, the thread that
 * waits for the graph included. The clock covers building the graph
 * (nodes + edges, the analogue of submission in the other systems) and
 * running it. */
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

static int64_t tbb_chain(int n, uint64_t *slots) {
  int64_t t0 = bench_now_ns();
  {
    tbb::flow::graph g;
    std::deque<node_t> nodes;
    for (int i = 0; i < n; i++) {
      nodes.emplace_back(g, [slots](const continue_msg &) { bench_kernel_empty(slots); });
      if (i > 0) tbb::flow::make_edge(nodes[i - 1], nodes[i]);
    }
    nodes[0].try_put(continue_msg());
    g.wait_for_all();
  }
  return bench_now_ns() - t0;
}

static int64_t tbb_indep(int n, uint64_t *slots) {
  int64_t t0 = bench_now_ns();
  {
    tbb::flow::graph g;
    std::deque<node_t> nodes;
    for (int i = 0; i < n; i++) {
      uint64_t *s = slots + (size_t)i * BENCH_SLOT_WORDS;
      nodes.emplace_back(g, [s](const continue_msg &) { bench_kernel_empty(s); });
      nodes.back().try_put(continue_msg());
    }
    g.wait_for_all();
  }
  return bench_now_ns() - t0;
}

static int64_t tbb_fanout(int rounds, uint64_t *slots) {
  uint64_t *r = slots, *a = slots + BENCH_SLOT_WORDS, *b = slots + 2 * BENCH_SLOT_WORDS;
  int64_t t0 = bench_now_ns();
  {
    tbb::flow::graph g;
    std::deque<node_t> nodes;
    node_t *prev = nullptr;
    for (int k = 0; k < rounds; k++) {
      nodes.emplace_back(g, [r, a](const continue_msg &) { bench_kernel_produce(r, a); });
      node_t &prod = nodes.back();
      if (prev) tbb::flow::make_edge(*prev, prod);
      size_t first = nodes.size();
      for (int j = 0; j < BENCH_FAN; j++) {
        uint64_t *bj = b + (size_t)j * BENCH_SLOT_WORDS;
        nodes.emplace_back(g, [a, bj](const continue_msg &) { bench_kernel_consume(a, bj); });
        tbb::flow::make_edge(prod, nodes.back());
      }
      nodes.emplace_back(g, [b, r](const continue_msg &) { bench_kernel_reduce(b, r); });
      node_t &red = nodes.back();
      for (int j = 0; j < BENCH_FAN; j++) tbb::flow::make_edge(nodes[first + j], red);
      prev = &red;
    }
    nodes[0].try_put(continue_msg());
    g.wait_for_all();
  }
  return bench_now_ns() - t0;
}

static int64_t tbb_graph(const bench_graph *bg, uint64_t *slots) {
  int64_t t0 = bench_now_ns();
  {
    tbb::flow::graph g;
    std::deque<node_t> nodes;
    for (int i = 0; i < bg->ntasks; i++) {
      nodes.emplace_back(g, [bg, i, slots](const continue_msg &) { bench_graph_task(bg, i, slots); });
      for (int j = bg->dep_start[i]; j < bg->dep_start[i + 1]; j++)
        tbb::flow::make_edge(nodes[bg->dep[j]], nodes.back());
    }
    /* Start the sources once the whole graph exists: a node that has
     * already fired would not see edges added to it later. */
    for (int i = 0; i < bg->ntasks; i++)
      if (bg->dep_start[i] == bg->dep_start[i + 1]) nodes[i].try_put(continue_msg());
    g.wait_for_all();
  }
  return bench_now_ns() - t0;
}

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
  return bench_main(argc, argv, &sys);
}
