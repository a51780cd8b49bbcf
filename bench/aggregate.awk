# bench/aggregate.awk — turns bench/results/raw.csv into results.csv (on
# stdout), the gnuplot data files and summary.md. Plain POSIX awk (mawk).
#
# raw.csv: round,invocation,RAW,system,workload,params,tasks,wall_ns,metric,value,class,alloc
# results.csv: system,workload,params,metric,median,min,max,ratio_to_pto,reps,class,alloc
#   class: dynamic (the graph built as it runs) or prebuilt (built once,
#   executed again); alloc: the allocator rule the run was under. Files
#   written before the classes (no class column) are read as dynamic.
#   ns_per_task rows (W1 chain, W2 indep, W4 fanout): wall / tasks;
#   efficiency rows (W3/W5, params G=<kernel grain us>): work / (wall x workers);
#   metg_us rows (W3/W5, params eff=50%): METG(50%) in us of kernel grain,
#   one value per sweep (invocation), interpolated (log scale) between the
#   last grain at >= 50% and the first below; "inf" when no grain reached 50%.
#   ratio_to_pto = median / pto's median for the same row and class (for
#   ns_per_task and metg_us, > 1 means pto is better; for efficiency, < 1).
# Variables: systems (space separated, in display order), plotdir, summary,
# machine (file included at the top of summary.md), rule (the allocator
# rule, one line, for the top of summary.md), grains (the sweep's grains,
# comma separated, as run.sh passed them to the programs).
#
# The input may also be a results.csv (bench/run.sh --replot when raw.csv is
# gone): its medians, minima and maxima are then taken as they are, only the
# plot data are written (results.csv on stdout again, no summary.md).
#
# Plot data (the efficiency sweeps and METG: dynamic class):
# eff_<workload>_<system>.dat (grain, median, min, max), stop_<workload>.dat
# (where a system's sweep ended before the finest grain, and why: the
# programs stop a sweep once it has crossed 50% and then falls below 20%,
# or stays below 50% for two grains in a row), ns_per_task.dat (dynamic),
# ns_per_task_prebuilt.dat, metg.dat, vars.gp.

function isort(a, n,    i, j, v) {
  for (i = 2; i <= n; i++) {
    v = a[i]
    for (j = i - 1; j >= 1 && a[j] + 0 > v + 0; j--) a[j + 1] = a[j]
    a[j + 1] = v
  }
}

function stats(key,    n, i, a, parts) {
  n = split(vals[key], parts, " ")
  for (i = 1; i <= n; i++) a[i] = parts[i]
  isort(a, n)
  S_n = n
  S_min = a[1]
  S_max = a[n]
  if (n % 2) S_med = a[(n + 1) / 2]
  else if (a[n / 2 + 1] + 0 >= INF) S_med = a[n / 2 + 1]
  else S_med = (a[n / 2] + a[n / 2 + 1]) / 2
}

function fmt(x) {
  if (x == "") return ""
  if (x + 0 >= INF) return "inf"
  return sprintf("%.4g", x)
}

function add(sys, wl, par, met, v, cls, alloc,    key) {
  key = sys SUBSEP wl SUBSEP par SUBSEP met SUBSEP cls
  ALLOC[key] = alloc
  class_sys[sys SUBSEP cls] = 1
  if (!(key in vals)) {
    vals[key] = v
    nkeys++
    keys[nkeys] = key
  } else {
    vals[key] = vals[key] " " v
  }
}

# Closes the sweep of one invocation: its METG(50%) is the smallest grain
# whose efficiency is >= 50% (Task Bench's definition), refined by log-scale
# interpolation towards the next finer grain measured (which is below 50%).
# No finer grain measured: that grain, flagged as an upper bound. No grain
# at 50%: inf.
function close_sweep(    i, best, g, e, metg) {
  if (cur_n == 0) return
  best = 0
  for (i = 1; i <= cur_n; i++)
    if (cur_e[i] >= 0.5 && (best == 0 || cur_g[i] < cur_g[best])) best = i
  if (best == 0) {
    metg = INF
  } else {
    # the next finer grain measured
    nx = 0
    for (i = 1; i <= cur_n; i++)
      if (cur_g[i] < cur_g[best] && (nx == 0 || cur_g[i] > cur_g[nx])) nx = i
    if (nx == 0) {
      metg = cur_g[best]
      upper[cur_sys SUBSEP cur_wl SUBSEP cur_cls] = 1
    } else {
      g = cur_g[nx]
      e = cur_e[nx]
      metg = (cur_e[best] - 0.5) / (cur_e[best] - e) * (log(g) - log(cur_g[best]))
      metg = exp(log(cur_g[best]) + metg)
    }
  }
  add(cur_sys, cur_wl, "eff=50%", "metg_us", metg, cur_cls, cur_alloc)
  cur_n = 0
}

BEGIN {
  INF = 1e300
  INF_BAR = 3000
  nsys = split(systems, sysl, " ")
  cur_inv = ""
  cur_n = 0
  finest = 0
  ncls = split("dynamic prebuilt", clsl, " ")
  ngr = split(grains, gr, ",")
  for (i = 1; i <= ngr; i++)
    if (finest == 0 || gr[i] + 0 < finest) finest = gr[i] + 0
}

NR == 1 {
  from_results = $1 == "system" && $5 == "median"
  next
}

# a results.csv row: system,workload,params,metric,median,min,max,ratio,reps,class,alloc
from_results {
  key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP ($10 == "" ? "dynamic" : $10)
  keys[++nkeys] = key
  ALLOC[key] = $11
  class_sys[$1 SUBSEP ($10 == "" ? "dynamic" : $10)] = 1
  vals[key] = $5
  MED[key] = $5 == "inf" ? INF : $5
  MIN[key] = $6 == "inf" ? INF : $6
  MAX[key] = $7 == "inf" ? INF : $7
  seen_row($2, $3, $4)
  next
}

{
  inv = $2
  sys = $4
  wl = $5
  par = $6
  met = $9
  v = $10
  cls = $11 == "" ? "dynamic" : $11
  if (inv != cur_inv) {
    close_sweep()
    cur_inv = inv
  }
  add(sys, wl, par, met, v, cls, $12)
  seen_row(wl, par, met)
  if (met == "efficiency") {
    cur_sys = sys
    cur_wl = wl
    cur_cls = cls
    cur_alloc = $12
    cur_n++
    cur_g[cur_n] = substr(par, 3) + 0
    cur_e[cur_n] = v + 0
  }
}

# The workloads in order of appearance, and each sweep's grains.
function seen_row(wl, par, met) {
  if (!(wl in wseen)) {
    wseen[wl] = 1
    nwl++
    wll[nwl] = wl
  }
  if (met == "efficiency" && !((wl SUBSEP par) in gseen)) {
    gseen[wl SUBSEP par] = 1
    ng[wl]++
    glist[wl, ng[wl]] = substr(par, 3) + 0
  }
}

END {
  if (from_results) {
    plot_data()
    exit
  }
  close_sweep()
  print "system,workload,params,metric,median,min,max,ratio_to_pto,reps,class,alloc"
  # Rows grouped by class, then workload, then params, then system in
  # display order.
  for (c = 1; c <= ncls; c++)
  for (w = 1; w <= nwl; w++) {
    wl = wll[w]
    for (k = 1; k <= nkeys; k++) {
      split(keys[k], f, SUBSEP)
      row = f[5] SUBSEP wl SUBSEP f[3] SUBSEP f[4]
      if (f[5] != clsl[c] || f[2] != wl || (row in done_par)) continue
      done_par[row] = 1
      pkey = "pto" SUBSEP wl SUBSEP f[3] SUBSEP f[4] SUBSEP f[5]
      pmed = ""
      if (pkey in vals) {
        stats(pkey)
        pmed = S_med
      }
      for (s = 1; s <= nsys; s++) {
        key = sysl[s] SUBSEP wl SUBSEP f[3] SUBSEP f[4] SUBSEP f[5]
        if (!(key in vals)) continue
        stats(key)
        ratio = ""
        if (pmed != "" && pmed + 0 > 0 && pmed + 0 < INF && S_med + 0 < INF)
          ratio = sprintf("%.3g", S_med / pmed)
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%d,%s,%s\n", sysl[s], wl, f[3], f[4], fmt(S_med),
          fmt(S_min), fmt(S_max), ratio, S_n, f[5], ALLOC[key]
        MED[key] = S_med
        MIN[key] = S_min
        MAX[key] = S_max
      }
    }
  }

  plot_data()

  # ---- summary.md ----
  print "# Benchmark results\n" > summary
  if (rule != "") print "**Allocator rule, the same for every system:** " rule "\n" > summary
  print "```" > summary
  while ((getline line < machine) > 0) print line > summary
  print "```\n" > summary
  print "Each cell: median (min-max) over all repetitions; x = ratio to pto's median" > summary
  print "in the same class (> 1: pto is faster / finer).\n" > summary
  print "## Dynamic class: the graph built as it runs\n" > summary
  print "The clock covers building (submitting) the graph and executing it, and no" > summary
  print "teardown.\n" > summary
  table("ns per task (W1 chain, W2 independent, W4 fan-out/fan-in; empty kernels)",
    "ns_per_task", "dynamic")
  table("METG(50%) in us of kernel grain (W3 stencil_1d, W5 patterns); smaller is better",
    "metg_us", "dynamic")
  print "## Prebuilt class: a graph built once, executed again\n" > summary
  if (!has_class("prebuilt")) {
    print "Not run.\n" > summary
  } else {
    print "The graph is built once, outside the clock; the clock covers one execution" > summary
    print "(the mean of several, after one unmeasured). What each system re-executes:" > summary
    print "the `config <system> prebuilt` lines above.\n" > summary
    table("ns per task, one execution of the prebuilt graph", "ns_per_task", "prebuilt")
    table("METG(50%) in us of kernel grain, prebuilt graphs", "metg_us", "prebuilt")
    if (!(("pto" SUBSEP "prebuilt") in class_sys))
      print "pto did not run in this class (it has one: bench_pto -c prebuilt).\n" > summary
    own_ratio_table()
  }
  print "Plots: efficiency_<pattern>.png (efficiency vs kernel grain, one line per" > summary
  print "system, bars = min-max), efficiency.png (all patterns), ns_per_task.png," > summary
  print "metg.png (dynamic class); ns_per_task_prebuilt.png (prebuilt class)." > summary
  close(summary)
}

function has_class(cls,    k, f) {
  for (k = 1; k <= nkeys; k++) {
    split(keys[k], f, SUBSEP)
    if (f[5] == cls) return 1
  }
  return 0
}

# Prebuilt ÷ dynamic for each system that has both: what building the graph
# weighs in its dynamic figure.
function own_ratio_table(    s, w, wl, row, kd, kp, any) {
  row = "| workload |"
  for (s = 1; s <= nsys; s++)
    if ((sysl[s] SUBSEP "prebuilt") in class_sys) row = row " " sysl[s] " |"
  print "### Prebuilt ÷ dynamic, same system (ns per task medians)\n" > summary
  print row > summary
  gsub(/ [^|]+ \|/, "---|", row)
  print row > summary
  for (w = 1; w <= nwl; w++) {
    wl = wll[w]
    if (ng[wl] > 0) continue
    row = "| " label(wl) " |"
    any = 0
    for (s = 1; s <= nsys; s++) {
      if (!((sysl[s] SUBSEP "prebuilt") in class_sys)) continue
      kd = findkey(sysl[s], wl, "ns_per_task", "dynamic")
      kp = findkey(sysl[s], wl, "ns_per_task", "prebuilt")
      if (kd != "" && kp != "" && (kd in MED) && (kp in MED) && MED[kd] + 0 > 0) {
        row = row " " sprintf("%.2g", MED[kp] / MED[kd]) " |"
        any = 1
      } else {
        row = row " - |"
      }
    }
    if (any) print row > summary
  }
  print "" > summary
}

# ---- gnuplot data ----
function plot_data(    w, wl, s, file, i, key, last, prev, stops, why, nstop) {
  system("mkdir -p '" plotdir "'")
  printf "" > (plotdir "/vars.gp")
  close(plotdir "/vars.gp")
  for (w = 1; w <= nwl; w++) {
    wl = wll[w]
    if (!ng[wl]) continue
    for (s = 1; s <= nsys; s++) {
      file = plotdir "/eff_" wl "_" sysl[s] ".dat"
      printf "# G_us median min max\n" > file
      for (i = 1; i <= ng[wl]; i++) {
        key = sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, i] SUBSEP "efficiency" SUBSEP "dynamic"
        if (key in MED) printf "%s %s %s %s\n", glist[wl, i], MED[key], MIN[key], MAX[key] > file
      }
      close(file)
    }
    # Where each sweep ended early (before the finest grain), and why.
    stops = plotdir "/stop_" wl ".dat"
    printf "# G_us median reason (0: fell below 20%%, 1: two grains below 50%%, 2: other) system\n" > stops
    for (s = 1; s <= nsys; s++) {
      last = prev = 0
      for (i = 1; i <= ng[wl]; i++) {
        key = sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, i] SUBSEP "efficiency" SUBSEP "dynamic"
        if (!(key in MED)) continue
        if (last == 0 || glist[wl, i] < glist[wl, last]) {
          prev = last
          last = i
        } else if (prev == 0 || glist[wl, i] < glist[wl, prev]) {
          prev = i
        }
      }
      if (last == 0 || glist[wl, last] <= finest) continue
      key = sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, last] SUBSEP "efficiency" SUBSEP "dynamic"
      why = MED[key] + 0 < 0.2 ? 0 : 2
      if (why == 2 && prev && MED[key] + 0 < 0.5 &&
          MED[sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, prev] SUBSEP "efficiency" SUBSEP "dynamic"] + 0 < 0.5)
        why = 1
      printf "%s %s %d %s\n", glist[wl, last], MED[key], why, sysl[s] > stops
      nstop[why]++
    }
    close(stops)
    printf "nstop0_%s = %d; nstop1_%s = %d; nstop2_%s = %d\n", wl, nstop[0], wl, nstop[1], wl,
      nstop[2] >> (plotdir "/vars.gp")
    nstop[0] = nstop[1] = nstop[2] = 0
  }
  # Bar charts: one row per workload, 3 columns (median min max) per system,
  # for the systems that have at least one value (plotdata/vars.gp names
  # them for plot.gp). METG "inf" (never 50%) is drawn at INF_BAR.
  bars("ns_per_task", "dynamic", plotdir "/ns_per_task.dat", "ns_systems")
  bars("ns_per_task", "prebuilt", plotdir "/ns_per_task_prebuilt.dat", "ns_pre_systems")
  bars("metg_us", "dynamic", plotdir "/metg.dat", "metg_systems")
  print "inf_bar = " INF_BAR >> (plotdir "/vars.gp")
  close(plotdir "/vars.gp")
}

function findkey(sys, wl, metric, cls,    k, f, key) {
  key = ""
  for (k = 1; k <= nkeys; k++) {
    split(keys[k], f, SUBSEP)
    if (f[1] == sys && f[2] == wl && f[4] == metric && f[5] == cls) key = keys[k]
  }
  return key
}

function barval(x) { return x + 0 >= INF ? INF_BAR : x }

function bars(metric, cls, file, varname,    s, w, wl, key, have, list, n, row, any) {
  list = ""
  n = 0
  for (s = 1; s <= nsys; s++) {
    have[s] = 0
    for (w = 1; w <= nwl; w++) {
      key = findkey(sysl[s], wll[w], metric, cls)
      if (key != "" && (key in MED)) have[s] = 1
    }
    if (have[s]) list = list (n++ ? " " : "") sysl[s]
  }
  printf "%s = '%s'\n", varname, list >> (plotdir "/vars.gp")
  printf "# workload" > file
  for (s = 1; s <= nsys; s++) if (have[s]) printf " %s - -", sysl[s] > file
  printf "\n" > file
  for (w = 1; w <= nwl; w++) {
    wl = wll[w]
    if ((metric == "metg_us") != (ng[wl] > 0)) continue
    row = label(wl)
    any = 0
    for (s = 1; s <= nsys; s++) {
      if (!have[s]) continue
      key = findkey(sysl[s], wl, metric, cls)
      if (key != "" && (key in MED)) {
        row = row " " barval(MED[key]) " " barval(MIN[key]) " " barval(MAX[key])
        any = 1
      } else {
        row = row " NaN NaN NaN"
      }
    }
    if (any) print row > file
  }
  close(file)
}

function label(wl) {
  if (wl == "chain") return "W1_chain"
  if (wl == "indep") return "W2_independent"
  if (wl == "fanout") return "W4_fanout"
  if (wl == "stencil_1d") return "W3_stencil_1d"
  return "W5_" wl
}

# One table of `metric` in class `cls`: a column per system that has rows
# in the class. In the prebuilt class, once pto is in it, two more
# columns: pto's replay against the best peer's dynamic figure and against
# oneTBB re-executing its prebuilt graph.
function table(title, metric, cls,    s, w, wl, key, row, pk, cell, vs, best, kb, i, any, head, sep,
              body, nbody) {
  vs = cls == "prebuilt" && metric == "ns_per_task" && (("pto" SUBSEP cls) in class_sys)
  row = "| workload |"
  for (s = 1; s <= nsys; s++)
    if ((sysl[s] SUBSEP cls) in class_sys) row = row " " sysl[s] " |"
  if (vs) row = row " pto ÷ best peer, dynamic | pto ÷ tbb, prebuilt |"
  head = row
  gsub(/ [^|]+ \|/, "---|", row)
  sep = row
  any = 0
  for (w = 1; w <= nwl; w++) {
    wl = wll[w]
    if ((metric == "metg_us") != (ng[wl] > 0)) continue
    pk = findkey("pto", wl, metric, cls)
    row = "| " label(wl) " |"
    for (s = 1; s <= nsys; s++) {
      if (!((sysl[s] SUBSEP cls) in class_sys)) continue
      key = findkey(sysl[s], wl, metric, cls)
      if (key == "" || !(key in MED)) {
        row = row " - |"
        continue
      }
      any = 1
      cell = (upper[sysl[s] SUBSEP wl SUBSEP cls] ? "<=" : "") fmt(MED[key])
      cell = cell " (" fmt(MIN[key]) "-" fmt(MAX[key]) ")"
      if (pk != "" && (pk in MED) && MED[pk] + 0 > 0 && MED[pk] + 0 < INF && MED[key] + 0 < INF)
        cell = cell " x" sprintf("%.2g", MED[key] / MED[pk])
      row = row " " cell " |"
    }
    if (vs) {
      best = ""
      for (s = 1; s <= nsys; s++) {
        if (sysl[s] == "pto") continue
        kb = findkey(sysl[s], wl, metric, "dynamic")
        if (kb != "" && (kb in MED) && (best == "" || MED[kb] + 0 < best + 0)) best = MED[kb]
      }
      kb = findkey("tbb", wl, metric, "prebuilt")
      if (pk == "" || !(pk in MED)) best = kb = ""
      row = row " " (best + 0 > 0 ? sprintf("%.2f", MED[pk] / best) : "-") " |"
      if (kb != "" && (kb in MED) && MED[kb] + 0 > 0)
        row = row " " sprintf("%.2f", MED[pk] / MED[kb]) " |"
      else
        row = row " - |"
    }
    body[++nbody] = row
  }
  if (any) {
    print "### " title "\n" > summary
    print head > summary
    print sep > summary
    for (i = 1; i <= nbody; i++) print body[i] > summary
    print "" > summary
  }
}
