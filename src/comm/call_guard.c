/* call_guard.c — the watchdog of calls that never return (call_guard.h). */
#include "comm/call_guard.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "common/clock.h"
#include "pto/status.h"

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cv; /* the watchdog's tick; CLOCK_MONOTONIC (init_once) */
static call_guard *watched;   /* under reg_mu */
static bool running;          /* the watchdog thread exists; under reg_mu */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A fork's child has no watchdog and watches nothing: its parent's guards
 * belong to threads it does not have. */
static void before_fork(void) { pthread_mutex_lock(&reg_mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&reg_mu); }
static void after_fork_child(void) {
  watched = NULL;
  running = false;
  pthread_mutex_unlock(&reg_mu);
}

static void init_once(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&reg_cv, &a);
  pthread_condattr_destroy(&a);
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* One look at every guard, reg_mu held: fires those armed, by one arming,
 * for longer than their allowance. */
static void look(uint64_t now) {
  for (call_guard *g = watched; g; g = g->next) {
    uint64_t gen = atomic_load_explicit(&g->gen, memory_order_acquire);
    if (!(gen & 1) || gen != g->seen_gen) {
      g->seen_gen = gen;
      g->seen_ns = now;
      continue;
    }
    int64_t allow = atomic_load_explicit(&g->allow_ms, memory_order_relaxed);
    double stuck_ms = (double)(now - g->seen_ns) / 1e6;
    if (stuck_ms > (double)allow) {
      g->fire(g, stuck_ms);
      g->seen_ns = pto_now_ns(); /* it returned: again after another allowance */
    }
  }
}

static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&reg_mu);
  while (watched) {
    look(pto_now_ns());
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += CALL_GUARD_TICK_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&reg_cv, &reg_mu, &ts);
  }
  running = false;
  pthread_mutex_unlock(&reg_mu);
  return NULL;
}

int call_guard_watch(call_guard *g, call_guard_fire fire) {
  pthread_once(&once, init_once);
  g->fire = fire;
  g->seen_gen = 0;
  g->seen_ns = 0;
  int rc = 0;
  pthread_mutex_lock(&reg_mu);
  if (!running) {
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    running = pthread_create(&t, &a, watchdog, NULL) == 0;
    pthread_attr_destroy(&a);
    if (!running) rc = PTO_ESYSTEM;
  }
  if (!rc) {
    g->next = watched;
    watched = g;
  }
  pthread_mutex_unlock(&reg_mu);
  return rc;
}

void call_guard_unwatch(call_guard *g) {
  pthread_mutex_lock(&reg_mu);
  for (call_guard **p = &watched; *p; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      break;
    }
  if (!watched) pthread_cond_signal(&reg_cv); /* the watchdog ends now */
  pthread_mutex_unlock(&reg_mu);
}
