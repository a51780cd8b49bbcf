# bench/aggregate.awk — turns bench/results/raw.csv into results.csv (on
# stdout), the gnuplot data files and summary.md. Plain POSIX awk (mawk).
#
# raw.csv: round,invocation,RAW,system,workload,params,tasks,wall_ns,metric,value
# results.csv: system,workload,params,metric,median,min,max,ratio_to_pto,reps
#   ns_per_task rows (W1 chain, W2 indep, W4 fanout): wall / tasks;
#   efficiency rows (W3/W5, params G=<kernel grain us>): work / (wall x workers);
#   metg_us rows (W3/W5, params eff=50%): METG(50%) in us of kernel grain,
#   one value per sweep (invocation), interpolated (log scale) between the
#   last grain at >= 50% and the first below; "inf" when no grain reached 50%.
#   ratio_to_pto = median / pto's median for the same row (for ns_per_task
#   and metg_us, > 1 means pto is better; for efficiency, < 1).
# Variables: systems (space separated, in display order), plotdir, summary,
# machine (file included at the top of summary.md), grains (the sweep's
# grains, comma separated, as run.sh passed them to the programs).
#
# The input may also be a results.csv (bench/run.sh --replot when raw.csv is
# gone): its medians, minima and maxima are then taken as they are, only the
# plot data are written (results.csv on stdout again, no summary.md).
#
# Plot data: eff_<workload>_<system>.dat (grain, median, min, max),
# stop_<workload>.dat (where a system's sweep ended before the finest grain,
# and why: the programs stop a sweep once it has crossed 50% and then falls
# below 20%, or stays below 50% for two grains in a row), ns_per_task.dat,
# metg.dat, vars.gp.

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

function add(sys, wl, par, met, v,    key) {
  key = sys SUBSEP wl SUBSEP par SUBSEP met
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
      upper[cur_sys SUBSEP cur_wl] = 1
    } else {
      g = cur_g[nx]
      e = cur_e[nx]
      metg = (cur_e[best] - 0.5) / (cur_e[best] - e) * (log(g) - log(cur_g[best]))
      metg = exp(log(cur_g[best]) + metg)
    }
  }
  add(cur_sys, cur_wl, "eff=50%", "metg_us", metg)
  cur_n = 0
}

BEGIN {
  INF = 1e300
  INF_BAR = 3000
  nsys = split(systems, sysl, " ")
  cur_inv = ""
  cur_n = 0
  finest = 0
  ngr = split(grains, gr, ",")
  for (i = 1; i <= ngr; i++)
    if (finest == 0 || gr[i] + 0 < finest) finest = gr[i] + 0
}

NR == 1 {
  from_results = $1 == "system" && $5 == "median"
  next
}

# a results.csv row: system,workload,params,metric,median,min,max,ratio,reps
from_results {
  key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
  keys[++nkeys] = key
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
  if (inv != cur_inv) {
    close_sweep()
    cur_inv = inv
  }
  add(sys, wl, par, met, v)
  seen_row(wl, par, met)
  if (met == "efficiency") {
    cur_sys = sys
    cur_wl = wl
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
  print "system,workload,params,metric,median,min,max,ratio_to_pto,reps"
  # Rows grouped by workload, then params, then system in display order.
  for (w = 1; w <= nwl; w++) {
    wl = wll[w]
    for (k = 1; k <= nkeys; k++) {
      split(keys[k], f, SUBSEP)
      if (f[2] != wl || ((wl SUBSEP f[3] SUBSEP f[4]) in done_par)) continue
      done_par[wl SUBSEP f[3] SUBSEP f[4]] = 1
      pkey = "pto" SUBSEP wl SUBSEP f[3] SUBSEP f[4]
      pmed = ""
      if (pkey in vals) {
        stats(pkey)
        pmed = S_med
      }
      for (s = 1; s <= nsys; s++) {
        key = sysl[s] SUBSEP wl SUBSEP f[3] SUBSEP f[4]
        if (!(key in vals)) continue
        stats(key)
        ratio = ""
        if (pmed != "" && pmed + 0 > 0 && pmed + 0 < INF && S_med + 0 < INF)
          ratio = sprintf("%.3g", S_med / pmed)
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%d\n", sysl[s], wl, f[3], f[4], fmt(S_med), fmt(S_min),
          fmt(S_max), ratio, S_n
        MED[key] = S_med
        MIN[key] = S_min
        MAX[key] = S_max
      }
    }
  }

  plot_data()

  # ---- summary.md ----
  print "# Benchmark results\n" > summary
  print "```" > summary
  while ((getline line < machine) > 0) print line > summary
  print "```\n" > summary
  print "Each cell: median (min-max) over all repetitions; x = ratio to pto's median" > summary
  print "(> 1: pto is faster / finer).\n" > summary
  table("ns per task (W1 chain, W2 independent, W4 fan-out/fan-in; empty kernels)",
    "ns_per_task")
  table("METG(50%) in us of kernel grain (W3 stencil_1d, W5 patterns); smaller is better",
    "metg_us")
  print "Plots: efficiency_<pattern>.png (efficiency vs kernel grain, one line per" > summary
  print "system, bars = min-max), efficiency.png (all patterns), ns_per_task.png," > summary
  print "metg.png." > summary
  close(summary)
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
        key = sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, i] SUBSEP "efficiency"
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
        key = sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, i] SUBSEP "efficiency"
        if (!(key in MED)) continue
        if (last == 0 || glist[wl, i] < glist[wl, last]) {
          prev = last
          last = i
        } else if (prev == 0 || glist[wl, i] < glist[wl, prev]) {
          prev = i
        }
      }
      if (last == 0 || glist[wl, last] <= finest) continue
      key = sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, last] SUBSEP "efficiency"
      why = MED[key] + 0 < 0.2 ? 0 : 2
      if (why == 2 && prev && MED[key] + 0 < 0.5 &&
          MED[sysl[s] SUBSEP wl SUBSEP "G=" glist[wl, prev] SUBSEP "efficiency"] + 0 < 0.5)
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
  bars("ns_per_task", plotdir "/ns_per_task.dat", "ns_systems")
  bars("metg_us", plotdir "/metg.dat", "metg_systems")
  print "inf_bar = " INF_BAR >> (plotdir "/vars.gp")
  close(plotdir "/vars.gp")
}

function findkey(sys, wl, metric,    k, f, key) {
  key = ""
  for (k = 1; k <= nkeys; k++) {
    split(keys[k], f, SUBSEP)
    if (f[1] == sys && f[2] == wl && f[4] == metric) key = keys[k]
  }
  return key
}

function barval(x) { return x + 0 >= INF ? INF_BAR : x }

function bars(metric, file, varname,    s, w, wl, key, have, list, n) {
  list = ""
  n = 0
  for (s = 1; s <= nsys; s++) {
    have[s] = 0
    for (w = 1; w <= nwl; w++) {
      key = findkey(sysl[s], wll[w], metric)
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
    printf "%s", label(wl) > file
    for (s = 1; s <= nsys; s++) {
      if (!have[s]) continue
      key = findkey(sysl[s], wl, metric)
      if (key != "" && (key in MED))
        printf " %s %s %s", barval(MED[key]), barval(MIN[key]), barval(MAX[key]) > file
      else
        printf " NaN NaN NaN" > file
    }
    printf "\n" > file
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

function table(title, metric,    s, w, wl, key, k, f, row, pk, cell) {
  print "## " title "\n" > summary
  row = "| workload |"
  for (s = 1; s <= nsys; s++) row = row " " sysl[s] " |"
  print row > summary
  row = "|---|"
  for (s = 1; s <= nsys; s++) row = row "---|"
  print row > summary
  for (w = 1; w <= nwl; w++) {
    wl = wll[w]
    if ((metric == "metg_us") != (ng[wl] > 0)) continue
    row = "| " label(wl) " |"
    pk = ""
    for (s = 1; s <= nsys; s++) {
      key = ""
      for (k = 1; k <= nkeys; k++) {
        split(keys[k], f, SUBSEP)
        if (f[1] == sysl[s] && f[2] == wl && f[4] == metric) key = keys[k]
      }
      if (sysl[s] == "pto") pk = key
    }
    for (s = 1; s <= nsys; s++) {
      key = ""
      for (k = 1; k <= nkeys; k++) {
        split(keys[k], f, SUBSEP)
        if (f[1] == sysl[s] && f[2] == wl && f[4] == metric) key = keys[k]
      }
      if (key == "" || !(key in MED)) {
        row = row " - |"
        continue
      }
      cell = (upper[sysl[s] SUBSEP wl] ? "<=" : "") fmt(MED[key])
      cell = cell " (" fmt(MIN[key]) "-" fmt(MAX[key]) ")"
      if (pk != "" && (pk in MED) && MED[pk] + 0 > 0 && MED[pk] + 0 < INF && MED[key] + 0 < INF)
        cell = cell " x" sprintf("%.2g", MED[key] / MED[pk])
      row = row " " cell " |"
    }
    print row > summary
  }
  print "" > summary
}
