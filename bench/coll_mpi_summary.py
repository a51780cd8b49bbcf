"""coll_mpi_summary.py — bench/coll_mpi_repeat.sh's runs as one markdown
table: per point and build, the median over runs of the run's median ratio
(pto's time over the MPI call's in the same trial), the min and max over
runs, and the median µs per call.

    python3 bench/coll_mpi_summary.py OUTDIR before,after [pto,pto-repro,...]
        [--reference BUILD]

--reference BUILD: BUILD's runs are Open MPI's calls alone at another
thread level (bench_coll_mpi --mpi-thread LEVEL, their rows' systems say
"@LEVEL"), alternated with the other builds' runs; each other build then
also gets pto's median µs over that run's reference median µs, run by run
(run r of a build against run r of BUILD), median (min-max) over runs.
"""
import collections
import csv
import statistics
import sys

MPI_OF = {"allreduce": "MPI_Allreduce", "allgather": "MPI_Allgather",
          "reduce_scatter": "MPI_Reduce_scatter_block", "broadcast": "MPI_Bcast",
          "alltoall": "MPI_Alltoall", "put": "MPI_Put+flush", "get": "MPI_Get+flush"}


def read(outdir, build):
    """(windows, ranks, coll, bytes, system) -> {run: (ratio, us)}, loads"""
    rows = collections.defaultdict(dict)
    loads = []
    with open(f"{outdir}/{build}.csv") as f:
        for r in csv.reader(f):
            key = (r[1], int(r[0]), r[2], int(r[3]), r[4])
            rows[key][int(r[12])] = (float(r[8]), float(r[5]))
            loads.append(float(r[11]))
    return rows, loads


def spread(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main():
    args = sys.argv[1:]
    ref = None
    if "--reference" in args:
        i = args.index("--reference")
        ref = args[i + 1]
        del args[i:i + 2]
    outdir, builds = args[0], args[1].split(",")
    systems = args[2].split(",") if len(args) > 2 else ["pto"]
    data, loads = {}, []
    for b in builds + ([ref] if ref and ref not in builds else []):
        data[b], more = read(outdir, b)
        loads += more
    shown = [b for b in builds if b != ref]
    level = ""
    if ref:
        level = next((k[4].split("@")[1] for k in data[ref] if "@" in k[4]), "?")
    print(f"load average at the runs' starts: {min(loads):.1f}-{max(loads):.1f} "
          f"(median {statistics.median(loads):.1f})\n")
    head = []
    for b in shown:
        head.append(f"{b}: ratio median (min-max) [µs]")
        if ref:
            head.append(f"{b} ÷ MPI at {level} ({ref}'s runs)")
    print("| windows | ranks | collective | bytes | system | " + " | ".join(head) + " |")
    print("|---|---|---|---|---|" + "---|" * len(head))
    for k in sorted({k for b in shown for k in data[b]}):
        if k[4] not in systems:
            continue
        cells = []
        for b in shown:
            x = data[b].get(k)
            if not x:
                cells += ["-"] * (2 if ref else 1)
                continue
            rs, us = [a for a, _ in x.values()], [u for _, u in x.values()]
            cells.append(f"{spread(rs)} [{statistics.median(us):.3f}]")
            if ref:
                mpi = data[ref].get(k[:4] + (f"{MPI_OF[k[2]]}@{level}",), {})
                q = [x[r][1] / mpi[r][1] for r in x if r in mpi and mpi[r][1] > 0]
                cells.append(f"{spread(q)} [{statistics.median(u for _, u in mpi.values()):.3f}]"
                             if q else "-")
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
