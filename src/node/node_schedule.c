/* node_schedule.c — the node's controller of a controlled schedule
 * (node_schedule.h): which ready node task starts next, one at a time,
 * drawn from the seed or read from the node record; the files and seeds
 * each chip task gets. */
#include "node/node_schedule.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chip/schedule_record.h"
#include "common/clock.h"
#include "common/rec_file.h"
#include "node/node_internal.h"

#define NODE_SCHED_VERSION 1

typedef struct rec_launch { /* a T line */
  int64_t task, submitted;
  int nslots;
  int slots[PTO_NODE_MAX_CHIPS];
  int line;
} rec_launch;

struct node_sched {
  uint64_t seed, rng;
  bool record, replay, diverged;
  int64_t first_id;  /* the run's first node task id: tasks are named by their index */
  int32_t first_dom; /* the run's first domain id: domains likewise */
  /* record: the lines made; replay: the lines read */
  rec_launch *lines;
  int64_t nlines, cap, next;
  int64_t rec_tasks; /* replay: the record's task count */
};

int node_sched_config(pto_node *n, const pto_node_config *cfg, pto_error_info *err) {
  const pto_chip_config *c = &cfg->chip;
  n->cfg.chip.record_path = n->cfg.chip.replay_path = NULL; /* each chip task gets its own */
  n->sched_record = c->record_path ? strdup(c->record_path) : NULL;
  n->sched_replay = c->replay_path ? strdup(c->replay_path) : NULL;
  if ((c->record_path && !n->sched_record) || (c->replay_path && !n->sched_replay)) {
    node_sched_free_config(n);
    node_set_err(err, PTO_ENOMEM, "node config: out of memory");
    return PTO_ENOMEM;
  }
  return 0;
}

void node_sched_free_config(pto_node *n) {
  free(n->sched_record);
  free(n->sched_replay);
  n->sched_record = n->sched_replay = NULL;
}

static void sched_free(node_sched *x) {
  if (!x) return;
  free(x->lines);
  free(x);
}

static rec_launch *add_line(node_sched *x) {
  if (x->nlines == x->cap) {
    int64_t cap = x->cap ? 2 * x->cap : 64;
    rec_launch *l = realloc(x->lines, (size_t)cap * sizeof *l);
    if (!l) return NULL;
    x->lines = l;
    x->cap = cap;
  }
  rec_launch *l = &x->lines[x->nlines++];
  memset(l, 0, sizeof *l);
  return l;
}

/* "KEY N" at *s (KEY then a number in [lo, hi], by the records' one
 * parser); advances *s past it. */
static bool key_num(char **s, const char *key, long long lo, long long hi, long long *v) {
  size_t k = strlen(key);
  if (strncmp(*s, key, k) != 0 || (*s)[k] != ' ') return false;
  char *p = *s + k;
  if (!rec_num(&p, lo, hi, v)) return false;
  *s = p;
  return true;
}

/* Reads the node record whole; 0, or PTO_EREPLAY latched naming the line. */
static int read_record(pto_node *n, node_sched *x, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return node_first_err(n, PTO_EREPLAY, "node schedule record %s: cannot open: %s", path,
                          strerror(errno));
  char *s = NULL;
  size_t cap = 0;
  ssize_t got;
  int line = 0, stage = 0, rc = 0;
  long long a, b;
  bool ended = false;
  errno = 0;
  while (!rc && (got = getline(&s, &cap, f)) > 0) {
    line++;
    char *p = s;
    if (memchr(s, '\0', (size_t)got)) {
      rc = node_first_err(n, PTO_EREPLAY,
                          "node schedule record %s: line %d: a NUL byte (a record is text)", path,
                          line);
    } else if (s[got - 1] != '\n') {
      break; /* its last line without its newline: truncated, below */
    } else if (ended) {
      rc = node_first_err(n, PTO_EREPLAY, "node schedule record %s: line %d after \"end\"", path,
                          line);
    } else if (stage == 0) {
      if (!key_num(&p, "pto-node-schedule", 0, 1000, &a) || *p != '\n' || a != NODE_SCHED_VERSION)
        rc = node_first_err(n, PTO_EREPLAY,
                            "node schedule record %s: line 1 is not \"pto-node-schedule %d\"", path,
                            NODE_SCHED_VERSION);
      stage = 1;
    } else if (stage == 1) {
      /* a seed above INT64_MAX is refused where it is set (pto_chip_create) */
      if (!key_num(&p, "seed", 0, INT64_MAX, &a) || *p != '\n')
        rc = node_first_err(n, PTO_EREPLAY,
                            "node schedule record %s: line %d: malformed seed (0..%lld)", path,
                            line, (long long)INT64_MAX);
      x->seed = (uint64_t)a;
      stage = 2;
    } else if (stage == 2) {
      bool shape = key_num(&p, "chips", 0, INT32_MAX, &a) && *p++ == ' ' &&
                   key_num(&p, "workers", 0, INT32_MAX, &b) && *p == '\n';
      if (!shape)
        rc = node_first_err(n, PTO_EREPLAY, "node schedule record %s: line %d: malformed shape",
                            path, line);
      else if (a != n->cfg.nchips || b != n->cfg.nworkers)
        rc =
            node_first_err(n, PTO_EREPLAY,
                           "replay of %s diverged at line %d: recorded on %lld chips and %lld host "
                           "workers, this node has %d and %d",
                           path, line, a, b, n->cfg.nchips, n->cfg.nworkers);
      stage = 3;
    } else if (s[0] == 'T' && s[1] == ' ') {
      rec_launch *l = add_line(x);
      long long task, sub, v;
      p = s + 1;
      bool ok = l && rec_num(&p, 0, INT64_MAX, &task) && rec_num(&p, 1, INT64_MAX, &sub);
      if (ok) l->line = line, l->task = task, l->submitted = sub;
      while (ok && *p == ' ') {
        ok = l->nslots < PTO_NODE_MAX_CHIPS && rec_num(&p, 0, n->nchildren - 1, &v);
        if (ok) l->slots[l->nslots++] = (int)v;
      }
      if (!ok || l->nslots == 0 || *p != '\n')
        rc = node_first_err(n, PTO_EREPLAY,
                            "node schedule record %s: line %d: malformed launch \"%.*s\"", path,
                            line, (int)strcspn(s, "\n"), s);
    } else if (key_num(&p, "tasks", 0, INT64_MAX, &a) && *p == '\n') {
      x->rec_tasks = a;
    } else if (strcmp(s, "end\n") == 0) {
      ended = true;
    } else {
      rc = node_first_err(n, PTO_EREPLAY, "node schedule record %s: line %d: malformed \"%.*s\"",
                          path, line, (int)strcspn(s, "\n"), s);
    }
    errno = 0;
  }
  int read_errno = ferror(f) ? (errno ? errno : EIO) : 0; /* a directory opens, then reads fail */
  free(s);
  fclose(f);
  if (!rc && read_errno)
    rc = node_first_err(n, PTO_EREPLAY, "node schedule record %s: cannot read: %s", path,
                        strerror(read_errno));
  if (!rc && !ended)
    rc = node_first_err(n, PTO_EREPLAY,
                        "node schedule record %s: truncated (it does not end with its \"end\" "
                        "line)",
                        path);
  return rc;
}

int node_sched_begin(pto_node *n) {
  sched_free(n->sched);
  n->sched = NULL;
  const pto_chip_config *c = &n->cfg.chip;
  if (!c->schedule_seed && !n->sched_record && !n->sched_replay) return 0;
  node_sched *x = calloc(1, sizeof *x);
  if (!x) return node_first_err(n, PTO_ENOMEM, "node schedule: out of memory");
  x->record = n->sched_record != NULL;
  x->replay = n->sched_replay != NULL;
  x->first_id = n->next_id;
  x->first_dom = n->next_dom;
  x->seed = c->schedule_seed;
  n->sched = x;
  if (x->replay) {
    int rc = read_record(n, x, n->sched_replay);
    if (rc) {
      x->diverged = true; /* the run goes on free and fails with the error */
      return rc;
    }
  } else if (!x->seed) {
    /* kept in the record, which reads back at most INT64_MAX */
    x->seed = ((pto_now_ns() ^ ((uint64_t)getpid() << 32)) & INT64_MAX) | 1;
  }
  x->rng = x->seed;
  return 0;
}

/* 0, or -1 with errno. */
static int write_record(pto_node *n, node_sched *x) {
  rec_file w;
  if (rec_file_open(&w, n->sched_record)) return -1;
  FILE *f = w.f;
  fprintf(f, "pto-node-schedule %d\nseed %" PRIu64 "\nchips %d workers %d\n", NODE_SCHED_VERSION,
          x->seed, n->cfg.nchips, n->cfg.nworkers);
  for (int64_t i = 0; i < x->nlines; i++) {
    const rec_launch *l = &x->lines[i];
    fprintf(f, "T %" PRId64 " %" PRId64, l->task, l->submitted);
    for (int j = 0; j < l->nslots; j++)
      fprintf(f, " %d", l->slots[j]);
    fprintf(f, "\n");
  }
  fprintf(f, "tasks %" PRId64 "\nend\n", n->next_id - x->first_id);
  return rec_file_close(&w, n->sched_record);
}

void node_sched_end(pto_node *n) {
  node_sched *x = n->sched;
  if (!x) return;
  int64_t tasks = n->next_id - x->first_id;
  if (x->replay && !x->diverged) {
    if (x->next < x->nlines)
      node_first_err(n, PTO_EREPLAY,
                     "replay of %s diverged at line %d: the run ended with the record's launches "
                     "from this line on not made",
                     n->sched_replay, x->lines[x->next].line);
    else if (tasks != x->rec_tasks)
      node_first_err(n, PTO_EREPLAY,
                     "replay of %s diverged: the run submitted %" PRId64 " node tasks, the record "
                     "%" PRId64,
                     n->sched_replay, tasks, x->rec_tasks);
  }
  if (x->record && write_record(n, x) != 0)
    node_first_err(n, PTO_ESYSTEM, "node schedule record %s: cannot be written: %s",
                   n->sched_record, strerror(errno));
  sched_free(x);
  n->sched = NULL;
}

int32_t node_sched_dom_index(const pto_node *n, int32_t id) {
  return n->sched ? id - n->sched->first_dom : 0;
}

bool node_sched_on(const pto_node *n) { return n->sched && !n->sched->diverged; }

int node_sched_pick(pto_node *n, struct node_task *const *cand, int k) {
  node_sched *x = n->sched;
  if (k == 0) return -1;
  int64_t submitted = n->next_id - x->first_id;
  if (!x->replay) { /* uniform among the ready ones: one splitmix64 step */
    uint64_t z = x->rng;
    x->rng += 0x9e3779b97f4a7c15ull;
    return (int)(node_sched_mix(z) % (uint64_t)k);
  }
  const char *why = NULL;
  int pick = -1;
  const rec_launch *l = x->next < x->nlines ? &x->lines[x->next] : NULL;
  char detail[200] = "";
  if (!l) {
    why = "the run starts a node task where the record has ended";
  } else if (l->submitted != submitted) {
    snprintf(detail, sizeof detail,
             "the record starts node task %" PRId64 " with %" PRId64 " submitted, the run waits "
             "with %" PRId64,
             l->task, l->submitted, submitted);
  } else {
    for (int i = 0; i < k && pick < 0; i++)
      if (cand[i]->id - x->first_id == l->task) pick = i;
    if (pick < 0)
      snprintf(detail, sizeof detail, "node task %" PRId64 " is not ready at this point", l->task);
    else if (cand[pick]->children[0] >= 0 &&
             (cand[pick]->nchildren != l->nslots ||
              memcmp(cand[pick]->children, l->slots, sizeof(int) * (size_t)l->nslots) != 0))
      snprintf(detail, sizeof detail, "node task %" PRId64 " runs on other chips or workers",
               l->task);
    else if (cand[pick]->children[0] < 0 && (l->nslots != 1 || l->slots[0] < n->cfg.nchips))
      snprintf(detail, sizeof detail, "node task %" PRId64 " is a host task here, not there",
               l->task);
  }
  if (why || detail[0]) {
    node_first_err(n, PTO_EREPLAY, "replay of %s diverged at line %d: %s", n->sched_replay,
                   l ? l->line : 0, why ? why : detail);
    x->diverged = true; /* the free scheduler finishes the run; it fails with this */
    return -1;
  }
  return pick;
}

void node_sched_launch(pto_node *n, const struct node_task *t, const int *slots, int k,
                       struct node_frame *f) {
  node_sched *x = n->sched;
  f->sched_task = -1;
  if (!x || x->diverged) return;
  f->sched_task = t->id - x->first_id;
  if (x->replay) {
    x->next++;
    return;
  }
  if (!x->record) return;
  rec_launch *l = add_line(x);
  if (!l) {
    node_first_err(n, PTO_ENOMEM, "node schedule record: out of memory");
    return;
  }
  l->task = t->id - x->first_id;
  l->submitted = n->next_id - x->first_id;
  l->nslots = k;
  memcpy(l->slots, slots, sizeof(int) * (size_t)k);
}

uint64_t node_sched_fault_seed(const pto_node *n, uint64_t fault_seed) {
  /* a schedule seed draws the delivery orders too */
  return n->sched ? fault_seed ^ node_sched_mix(n->sched->seed) : fault_seed;
}
