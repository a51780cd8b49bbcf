# bench/plot.gp — the suite's figures, from the data aggregate.awk writes.
#   gnuplot -e "dir='bench/results'; sub1='machine'; sub2='pto config'; systems='pto ...'; \
#              patterns='stencil_1d fft ...'" plot.gp
# efficiency_<pattern>.png  efficiency vs kernel grain per system (Task Bench's figure)
# efficiency.png            all patterns on one page
# ns_per_task.png           W1/W2/W4 ns per task per system, bars = min..max (dynamic class)
# ns_per_task_prebuilt.png  the same for graphs built once and executed again (prebuilt class)
# metg.png                  METG(50%) per pattern per system, bars = min..max
# Where a system's sweep stopped before the finest grain, its last point is
# marked with why (plotdata/stop_<pattern>.dat): below 20% efficiency, or a
# second grain in a row below 50% (the sweep's stopping rule, bench.c).

set terminal pngcairo size 820,560 noenhanced font "DejaVu Sans,10"
set encoding utf8
if (!exists("sub1")) sub1 = ""
if (!exists("sub2")) sub2 = ""
subtitle = sub1.(strlen(sub2) > 0 ? "\n".sub2 : "")
data = dir.'/plotdata'
load data.'/vars.gp'
nsys = words(systems)
npat = words(patterns)
set style line 1 lc rgb "#d62728" lw 2.5 pt 7 ps 0.9
set style line 2 lc rgb "#1f77b4" lw 1.5 pt 5 ps 0.8
set style line 3 lc rgb "#2ca02c" lw 1.5 pt 9 ps 0.9
set style line 4 lc rgb "#9467bd" lw 1.5 pt 11 ps 0.9
set style line 5 lc rgb "#ff7f0e" lw 1.5 pt 13 ps 0.9
set style line 6 lc rgb "#8c564b" lw 1.5 pt 15 ps 0.9
set style increment user

effplot(p) = sprintf("%s/eff_%s_", data, p)
stopfile(p) = sprintf("%s/stop_%s.dat", data, p)
nstop(p, why) = value(sprintf("nstop%d_%s", why, p))
# the key entry of a stop mark, only when the pattern has such a stop
stoptitle(p, why, text) = nstop(p, why) > 0 ? text : ""
set logscale x 10
set xrange [2000:0.1]
set yrange [0:1.15]
set ytics 0.1
set format x "%g"
set grid xtics ytics mxtics
set xlabel "kernel grain G (µs), finer to the right"
set ylabel "efficiency = work / (wall × workers)"
# sample first, then its name, left-aligned
set key bottom left box opaque Left reverse samplen 2.5 spacing 1.1

do for [p in patterns] {
  set output sprintf("%s/efficiency_%s.png", dir, p)
  set title p.": efficiency vs kernel grain; METG(50%) is where a line crosses the dashed 50% line\n".subtitle
  plot for [i=1:nsys] effplot(p).word(systems, i).'.dat' using 1:2:3:4 with yerrorlines ls i \
         title word(systems, i), \
       0.5 with lines dt 2 lc rgb "gray40" lw 1 title "50%", \
       stopfile(p) using 1:($3 == 0 ? $2 : NaN) with points pt 2 ps 2.2 lw 2 lc rgb "black" \
         title stoptitle(p, 0, "sweep stopped: below 20%"), \
       stopfile(p) using 1:($3 == 1 ? $2 : NaN) with points pt 6 ps 2.2 lw 2 lc rgb "black" \
         title stoptitle(p, 1, "sweep stopped: 2nd grain below 50%"), \
       stopfile(p) using 1:($3 == 2 ? $2 : NaN) with points pt 4 ps 2.2 lw 2 lc rgb "black" \
         title stoptitle(p, 2, "sweep stopped (see run.log)")
  unset output
}

set output dir.'/efficiency.png'
set terminal pngcairo size 1400,900 noenhanced font "DejaVu Sans,9"
cols = npat > 4 ? 3 : 2
rows = (npat + cols - 1) / cols
set multiplot layout rows, cols title "Efficiency vs kernel grain, Task Bench patterns (× sweep stopped below 20%, ○ stopped at a 2nd grain below 50%)\n".subtitle
set xlabel "kernel grain G (µs)"
set ylabel "efficiency"
do for [p in patterns] {
  set title p
  plot for [i=1:nsys] effplot(p).word(systems, i).'.dat' using 1:2:3:4 with yerrorlines ls i \
         title word(systems, i), \
       0.5 with lines dt 2 lc rgb "gray40" lw 1 notitle, \
       stopfile(p) using 1:($3 == 0 ? $2 : NaN) with points pt 2 ps 1.8 lw 2 lc rgb "black" notitle, \
       stopfile(p) using 1:($3 == 1 ? $2 : NaN) with points pt 6 ps 1.8 lw 2 lc rgb "black" notitle, \
       stopfile(p) using 1:($3 == 2 ? $2 : NaN) with points pt 4 ps 1.8 lw 2 lc rgb "black" notitle
}
unset multiplot
unset output

reset
set terminal pngcairo size 880,600 noenhanced font "DejaVu Sans,10"
color(s) = s eq 'pto' ? "#d62728" : s eq 'omp-gcc' ? "#1f77b4" : s eq 'omp-clang' ? "#2ca02c" : \
           s eq 'starpu' ? "#9467bd" : "#ff7f0e"
set style data histogram
set style histogram errorbars gap 1.5 lw 1
set style fill solid 0.75 border -1
set boxwidth 0.9
set logscale y 10
set grid ytics
# each swatch right before its system's name
set key below horizontal Left reverse samplen 1.5 width 1
set xtics nomirror

if (words(ns_systems) > 0) {
  set output dir.'/ns_per_task.png'
  set title "Dynamic class: overhead per task with empty kernels, graph built as it runs\n".\
            "(median; bars: min to max; lower is better)\n".subtitle
  set ylabel "ns per task"
  plot for [i=1:words(ns_systems)] data.'/ns_per_task.dat' \
         using (column(3*i-1)):(column(3*i)):(column(3*i+1)):xtic(1) \
         lc rgb color(word(ns_systems, i)) title word(ns_systems, i)
  unset output
}

if (exists("ns_pre_systems") && words(ns_pre_systems) > 0) {
  set output dir.'/ns_per_task_prebuilt.png'
  set title "Prebuilt class: ns per task of one execution of a graph built once, empty kernels\n".\
            "(median; bars: min to max; lower is better)\n".subtitle
  set ylabel "ns per task"
  plot for [i=1:words(ns_pre_systems)] data.'/ns_per_task_prebuilt.dat' \
         using (column(3*i-1)):(column(3*i)):(column(3*i+1)):xtic(1) \
         lc rgb color(word(ns_pre_systems, i)) title word(ns_pre_systems, i)
  unset output
}

if (words(metg_systems) > 0) {
  set output dir.'/metg.png'
  set title "METG(50%): the smallest kernel grain at 50% efficiency (median; bars: min to max; lower is better)\n".\
            sprintf("a bar at %g: 50%% never reached\n", inf_bar).subtitle
  set ylabel "METG(50%) (µs of kernel grain)"
  set yrange [0.1:inf_bar * 1.5]
  plot for [i=1:words(metg_systems)] data.'/metg.dat' \
         using (column(3*i-1)):(column(3*i)):(column(3*i+1)):xtic(1) \
         lc rgb color(word(metg_systems, i)) title word(metg_systems, i)
  unset output
}
