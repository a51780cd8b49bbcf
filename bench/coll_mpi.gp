# bench/coll_mpi.gp — pto's time over Open MPI's for each collective and
# put/get, from bench_coll_mpi's CSV (bench/coll_mpi.c), one panel per
# (windows, ranks) run:
#   gnuplot -e "csv='bench/results/coll_mpi.csv'; out='bench/results/coll_mpi.png'" bench/coll_mpi.gp
# A point is pto's median µs per call over the MPI call's median at that
# size; 1 is parity. pto: PTO_COLL_AUTO (MPI's collectives on this backend).
# The runs: "windows" is shm, rma, or tcp-2hosts (two network-namespace
# hosts, scripts/two_hosts.sh: RMA windows on osc/ucx over TCP).
if (!exists("csv")) csv = 'bench/results/coll_mpi.csv'
if (!exists("out")) out = 'bench/results/coll_mpi.png'
set terminal pngcairo size 1500,900 noenhanced font "DejaVu Sans,9"
set output out
set datafile separator ","
set logscale x 2
set logscale y 2
set xlabel "bytes"
set ylabel "pto / MPI (time)"
set key top left font ",8"
set grid
set multiplot layout 2,3
ratio(w, n, c, sys, mpi) = sprintf("< awk -F, '$2==\"%s\" && $1==%d && $3==\"%s\" {if ($5==\"%s\") p[$4]=$6; if ($5==\"%s\") m[$4]=$6} END {for (s in p) if (s in m) print s \",\" p[s]/m[s]}' %s | sort -t, -k1 -n", w, n, c, sys, mpi, csv)
runs = "shm:2 shm:4 rma:2 rma:4 tcp-2hosts:2"
do for [run in runs] {
  w = run[1:strstrt(run, ":") - 1]
  n = run[strstrt(run, ":") + 1:]
  {
    set title sprintf("%s windows, %s ranks", w, n)
    plot ratio(w, n+0, "allreduce", "pto", "MPI_Allreduce") u 1:2 w lp t "allreduce", \
         ratio(w, n+0, "allreduce", "pto-ring", "MPI_Allreduce") u 1:2 w lp dt 2 t "allreduce ring (RMA)", \
         ratio(w, n+0, "allgather", "pto", "MPI_Allgather") u 1:2 w lp t "allgather", \
         ratio(w, n+0, "reduce_scatter", "pto", "MPI_Reduce_scatter_block") u 1:2 w lp t "reduce_scatter", \
         ratio(w, n+0, "broadcast", "pto", "MPI_Bcast") u 1:2 w lp t "broadcast", \
         ratio(w, n+0, "alltoall", "pto", "MPI_Alltoall") u 1:2 w lp t "alltoall", \
         ratio(w, n+0, "put", "pto", "MPI_Put+flush") u 1:2 w lp dt 3 t "put", \
         ratio(w, n+0, "get", "pto", "MPI_Get+flush") u 1:2 w lp dt 3 t "get", \
         1 w l lc rgb "black" notitle
  }
}
unset multiplot
