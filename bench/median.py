#!/usr/bin/env python3
"""Medians of Go benchmark lines: `rix-bench -bench X -count 5 | bench/median.py`.

Prints one row per benchmark name with the median of every unit seen (ns/op, B/op, ...,
extra metrics), and the number of runs. Lines not in Go's format pass through to stderr.

--skip-first: leaves out each benchmark's first line of every invocation (an invocation starts
at its "goos:" line), so that the output of several invocations of `-count 3` gives medians
of warm runs only: a process's first build of a large table touches fresh memory, which later
ones reuse (bench/RESULTS.md, "Page faults").
"""
import re
import statistics
import sys
from collections import OrderedDict

skip_first = "--skip-first" in sys.argv[1:]
rows = OrderedDict()
seen = set()  # names met in this invocation
for line in sys.stdin:
    if line.startswith("goos:"):
        seen = set()
    if not line.startswith("Benchmark"):
        sys.stderr.write(line)
        continue
    f = line.split()
    name = re.sub(r"-\d+$", "", f[0][len("Benchmark"):])
    if skip_first and name not in seen:
        seen.add(name)
        continue
    vals = rows.setdefault(name, OrderedDict())
    vals.setdefault("runs", []).append(1)
    for i in range(2, len(f) - 1, 2):
        try:
            vals.setdefault(f[i + 1], []).append(float(f[i]))
        except ValueError:
            pass

if skip_first and not rows:
    sys.stderr.write("median.py: --skip-first left no runs (use -count 2 or more)\n")
for name, vals in rows.items():
    runs = len(vals.pop("runs"))
    cells = []
    for unit, xs in vals.items():
        m = statistics.median(xs)
        if unit == "ns/op" and m >= 1e6:
            cells.append(f"{m / 1e6:.1f} ms/op")
        elif m >= 100:
            cells.append(f"{m:.0f} {unit}")
        else:
            cells.append(f"{m:.2f} {unit}")
    print(f"{name:45s} n={runs}  " + "  ".join(cells))
