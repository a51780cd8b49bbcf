"""coll_mpi_summary.py — bench/coll_mpi_repeat.sh's runs as one markdown
table: per point and build, the median over runs of the run's median ratio
(pto's time over the MPI call's in the same trial), the min and max over
runs, and the median µs per call.

    python3 bench/coll_mpi_summary.py OUTDIR before,after [pto,pto-repro,...]
"""
import collections
import csv
import statistics
import sys


def main():
    outdir, builds = sys.argv[1], sys.argv[2].split(",")
    systems = sys.argv[3].split(",") if len(sys.argv) > 3 else ["pto"]
    rows = collections.defaultdict(list)
    loads = []
    for b in builds:
        with open(f"{outdir}/{b}.csv") as f:
            for r in csv.reader(f):
                key = (r[1], int(r[0]), r[2], int(r[3]), r[4], b)
                rows[key].append((float(r[8]), float(r[5])))
                loads.append(float(r[11]))
    print(f"load average at the runs' starts: {min(loads):.1f}-{max(loads):.1f} "
          f"(median {statistics.median(loads):.1f})\n")
    print("| windows | ranks | collective | bytes | system | "
          + " | ".join(f"{b}: ratio median (min-max) [µs]" for b in builds) + " |")
    print("|---|---|---|---|---|" + "---|" * len(builds))
    for k in sorted({k[:5] for k in rows}):
        if k[4] not in systems:
            continue
        cells = []
        for b in builds:
            x = rows.get(k + (b,))
            if not x:
                cells.append("-")
                continue
            rs, us = [a for a, _ in x], [u for _, u in x]
            cells.append(f"{statistics.median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f}) "
                         f"[{statistics.median(us):.2f}]")
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
