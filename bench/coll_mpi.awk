# bench/coll_mpi.awk — bench_coll_mpi's CSV as markdown tables of pto's
# median time over the MPI call's, per size (columns) and collective (rows),
# one table per windows x ranks run:
#   awk -F, -f bench/coll_mpi.awk bench/results/coll_mpi.csv
# pto-ring and pto-repro rows compare those allreduce variants with
# MPI_Allreduce; "Iallreduce" is MPI's own MPI_Iallreduce + MPI_Wait.
function mpi_of(c) {
  return c == "allreduce" ? "MPI_Allreduce" : c == "allgather" ? "MPI_Allgather" \
       : c == "reduce_scatter" ? "MPI_Reduce_scatter_block" : c == "broadcast" ? "MPI_Bcast" \
       : c == "alltoall" ? "MPI_Alltoall" : c == "put" ? "MPI_Put+flush" : "MPI_Get+flush"
}
NR > 1 && $1 != "ranks" {
  run = $2 " windows, " $1 " ranks"
  if (!(run in seen)) { seen[run] = 1; runs[++nr] = run }
  if (!($4 in sz)) { sz[$4] = 1; sizes[++ns] = $4 + 0 }
  t[run, $3, $5, $4] = $6
}
END {
  n = split("allreduce:pto allreduce:pto-ring allreduce:pto-repro allreduce:MPI_Iallreduce allgather:pto reduce_scatter:pto broadcast:pto alltoall:pto put:pto get:pto", rows, " ")
  for (i = 1; i <= ns; i++) for (j = i + 1; j <= ns; j++) if (sizes[j] < sizes[i]) { x = sizes[i]; sizes[i] = sizes[j]; sizes[j] = x }
  for (r = 1; r <= nr; r++) {
    printf "\n%s: pto / MPI (median time)\n\n| | ", runs[r]
    for (i = 1; i <= ns; i++) printf "%s | ", (sizes[i] >= 1048576 ? sizes[i] / 1048576 " MiB" : sizes[i] >= 1024 ? sizes[i] / 1024 " KiB" : sizes[i] " B")
    printf "\n|---|"; for (i = 1; i <= ns; i++) printf "---|"; printf "\n"
    for (k = 1; k <= n; k++) {
      split(rows[k], p, ":"); c = p[1]; s = p[2]
      printf "| %s%s | ", c, s == "pto" ? "" : s == "MPI_Iallreduce" ? " (Iallreduce)" : " (" substr(s, 5) ")"
      for (i = 1; i <= ns; i++) {
        a = t[runs[r], c, s, sizes[i]]; b = t[runs[r], c, mpi_of(c), sizes[i]]
        printf "%s | ", (a != "" && b > 0) ? sprintf("%.2f", a / b) : "-"
      }
      printf "\n"
    }
  }
}
