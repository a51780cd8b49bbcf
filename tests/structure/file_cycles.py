#!/usr/bin/env python3
"""File-level dependency cycles among the files of src/ (docs/architecture.md,
"Dependency order"). A file depends on another when it includes it
(#include "...") or calls a function that only that other .c file defines
(a non-static function defined in exactly one .c). A cycle is a strongly
connected set of two or more files.

    file_cycles.py SOURCE_DIR [ALLOW_LIST]

Without ALLOW_LIST: prints the cycles, exit 1 if there are any. With it: the
allow-list holds the cycles known today, one a line ("a.c <-> b.c", the
files sorted; '#' starts a comment). Exit 1 on any cycle that is not listed
(a new one, or a listed one that grew) and on any listed cycle that no
longer exists (one that shrank or went away: the list must be edited to
match), so the list can only shrink. Python 3 standard library only."""
import os
import re
import sys


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text


def graph(root):
    src = os.path.join(root, "src")
    files = []
    for d, _, fs in os.walk(src):
        files += [os.path.join(d, f) for f in fs if f.endswith((".c", ".h"))]
    raw = {f: strip(open(f, errors="replace").read()) for f in files}
    edges = {f: set() for f in files}
    # includes: "x.h" next to the file, or "dir/x.h" under src/
    for f, t in raw.items():
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', t, re.M):
            for base in (os.path.dirname(f), src):
                p = os.path.normpath(os.path.join(base, m.group(1)))
                if p in edges and p != f:
                    edges[f].add(p)
                    break
    # calls: strings out, so that a name in a message is no call
    text = {f: re.sub(r'"(?:\\.|[^"\\\n])*"', '""', t) for f, t in raw.items()}
    defs = {}
    for f, t in text.items():
        if not f.endswith(".c"):
            continue
        for m in re.finditer(r"^[A-Za-z_][\w \*]*?\b([a-z_][a-z0-9_]*)\s*\([^;{]*\)\s*\{", t, re.M):
            name = m.group(1)
            if not re.search(r"^static\b[^\n]*\b" + re.escape(name) + r"\s*\(", t, re.M):
                defs.setdefault(name, set()).add(f)
    for f, t in text.items():
        if not f.endswith(".c"):
            continue
        for name in set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*\(", t)):
            where = defs.get(name, ())
            if f in where or len(where) != 1:
                continue
            edges[f] |= where
    return edges


def cycles(edges, root):
    """Tarjan's strongly connected components of two or more files."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(" <-> ".join(sorted(os.path.relpath(c, root) for c in comp)))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(os.path.join(root, "src")):
        print(f"file_cycles.py: {root} has no src/ folder", file=sys.stderr)
        return 2
    edges = graph(root)
    found = cycles(edges, root)
    nfiles = len(edges)
    if len(argv) == 2:
        for c in found:
            print("cycle:", c)
        print(f"{len(found)} cycles among {nfiles} files of src/")
        return 1 if found else 0
    allowed = []
    for line in open(argv[2]):
        line = line.split("#", 1)[0].strip()
        if line:
            allowed.append(" <-> ".join(sorted(s.strip() for s in line.split("<->"))))
    new = [c for c in found if c not in allowed]
    gone = [c for c in allowed if c not in found]
    for c in new:
        print(f"FAILED: new file cycle (not in {argv[2]}): {c}")
    for c in gone:
        print(f"FAILED: {argv[2]} lists a cycle that no longer exists (it shrank or went "
              f"away: make the list match): {c}")
    for c in found:
        if c in allowed:
            print("known cycle:", c)
    if new or gone:
        print("current cycles, for the allow-list:")
        for c in found:
            print("  " + c)
        return 1
    print(f"file cycles: {len(found)} known, none new, among {nfiles} files of src/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
