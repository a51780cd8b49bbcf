#!/usr/bin/env python3
"""locked_sites.py BINARY — where to put a uprobe to count each locked
instruction (lock prefix, xchg with a memory operand, mfence) of BINARY.

Linux refuses uprobes on lock-prefixed instructions (is_prefix_bad), so a
run of consecutive locked instructions is counted on a plain neighbour
that executes exactly as often: the instruction right after the run when
nothing jumps to it or into the run, else the one right before the run
when it is not a branch and nothing jumps into the run past it. Prints
"name=0xaddress weight" lines (weight: locked instructions the probe
stands for; by address, not function+offset: perf would resolve a name
that several static functions share to one of them, and a name+offset
at every inlined copy of the function), and "# unprobed function+offset"
for a run with neither."""
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([0-9a-f]+):\t(.*)$")
FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
TARGET = re.compile(r"^(j[a-z]+|call|loop[a-z]*|jmp)\s+([0-9a-f]+) <")


def locked(text):
    return text.startswith("lock ") or text.startswith("mfence") or (
        text.startswith("xchg ") and "(" in text)


def branch(text):
    return re.match(r"^(j[a-z]+|call|ret|loop|bnd|notrack)", text) is not None


def main():
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", sys.argv[1]], check=True,
                         capture_output=True, text=True).stdout
    funcs, cur = [], None
    targets = set()
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            cur = (m.group(2), int(m.group(1), 16), [])
            funcs.append(cur)
            continue
        m = LINE.match(line)
        if m and cur:
            addr, text = int(m.group(1), 16), m.group(2).strip()
            cur[2].append((addr, text))
            t = TARGET.match(text)
            if t:
                targets.add(int(t.group(2), 16))
    # events are numbered per name, across the functions that share it
    # (two static functions of one name got the same event names, and
    # perf refused the second)
    nth = {}
    for name, start, insns in funcs:
        base = name.split(".")[0].replace("@", "_")
        i = 0
        while i < len(insns):
            if not locked(insns[i][1]):
                i += 1
                continue
            j = i
            while j < len(insns) and locked(insns[j][1]):
                j += 1
            weight = j - i
            inner = any(insns[k][0] in targets for k in range(i + 1, j))
            site = None
            if not inner and j < len(insns) and insns[j][0] not in targets:
                site = insns[j][0]
            elif (not inner and i > 0 and insns[i][0] not in targets
                  and not branch(insns[i - 1][1]) and not locked(insns[i - 1][1])):
                site = insns[i - 1][0]
            if site is None:
                print(f"# unprobed {name}+{insns[i][0] - start}")
            else:
                n = nth.get(base, 0)
                nth[base] = n + 1
                # by address: perf resolves name+offset through the debug
                # info, at every inlined copy of the function too, where
                # the offset lands inside other instructions (a probe
                # there broke the program: SIGSEGV)
                print(f"{base}_{n}=0x{site:x} {weight}")
            i = j


main()
