#!/usr/bin/env python3
"""coll_mpi_status.py — the status tables of bench/results/coll_mpi_status/:
pto's time over Open MPI's call per collective and size, the median over
runs of each run's median, with the runs' min-max where a cell is over the
targets (1.1x; put and get 1.2x, issue 24), and the count of such cells.

    python3 bench/coll_mpi_status.py DIR [TITLE=FILE.csv ...]

Each CSV holds bench_coll_mpi's rows of several runs, each row prefixed
with its run's number (bench/results/coll_mpi_status/README.md has the
commands). Without TITLE=FILE pairs, the five files of that README.
"""
import csv
import statistics
import sys

CONFIGS = [("2 ranks, shared windows", "np2_shm.csv"), ("2 ranks, RMA windows", "np2_rma.csv"),
           ("4 ranks, shared windows", "np4_shm.csv"), ("4 ranks, RMA windows", "np4_rma.csv"),
           ("2 ranks, two hosts", "two_hosts.csv")]
CALLS = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "put", "get"]


def size_name(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"


def table(title, path):
    ratios = {}
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) < 12 or row[1] == "ranks" or row[5] != "pto":
                continue
            ratios.setdefault((row[3], int(row[4])), []).append(float(row[9]))
    sizes = sorted({s for _, s in ratios})
    over = 0
    out = [f"**{title}** (pto / Open MPI, median of the runs, min-max where over the target)", "",
           "| call | " + " | ".join(size_name(s) for s in sizes) + " |",
           "|---|" + "---|" * len(sizes)]
    for c in CALLS:
        if not any(k[0] == c for k in ratios):
            continue
        cells = []
        for s in sizes:
            r = ratios.get((c, s))
            if not r:
                cells.append("-")
                continue
            m = statistics.median(r)
            if m > (1.2 if c in ("put", "get") else 1.1):
                over += 1
                cells.append(f"**{m:.2f}** ({min(r):.2f}-{max(r):.2f})")
            else:
                cells.append(f"{m:.2f}")
        out.append(f"| {c} | " + " | ".join(cells) + " |")
    return "\n".join(out), over


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1].rstrip("/")
    configs = [a.split("=", 1) for a in sys.argv[2:]] or CONFIGS
    total = 0
    for title, name in configs:
        text, over = table(title, f"{d}/{name}")
        total += over
        print(text + "\n")
    print(f"cells over target: {total}")


if __name__ == "__main__":
    main()
