#!/bin/sh
# coll_mpi_repeat.sh — bench_coll_mpi repeated, and alternated between
# builds, for figures on a shared host whose load comes and goes:
#   sh bench/coll_mpi_repeat.sh RUNS NP OUTDIR "name=bench_coll_mpi ..." [bench args]
# e.g. sh bench/coll_mpi_repeat.sh 5 2 /tmp/cmp \
#        "before=old/build/tests/mpi/bench_coll_mpi after=build/tests/mpi/bench_coll_mpi" \
#        --trials 11 --max 32768
# Each run of each build appends its CSV rows to OUTDIR/name.csv with two
# more columns: the 1-minute load average when the run started, and the
# run's number. bench/coll_mpi_summary.py reads them. A build's arguments
# of its own follow its program, comma separated: Open MPI's calls alone at
# the thread level a program that is not pto's asks for, alternated with
# pto's runs, are "single=build/tests/mpi/bench_coll_mpi,--mpi-thread,single".
set -e
runs=$1 np=$2 out=$3 builds=$4
shift 4
mkdir -p "$out"
for r in $(seq 1 "$runs"); do
  for nb in $builds; do
    name=${nb%%=*} cmd=$(echo "${nb#*=}" | tr , ' ')
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086 # cmd: the program and its own arguments
    mpiexec -np "$np" --oversubscribe $cmd "$@" |
      awk -F, -v l="$load" -v r="$r" 'NR > 1 { print $0 "," l "," r }' >>"$out/$name.csv"
  done
done
