#!/usr/bin/env python3
"""Medians of Go benchmark lines: `rix-bench -bench X -count 5 | bench/median.py`.

Prints one row per benchmark name with the median of every unit seen (ns/op, B/op, ...,
extra metrics), and the number of runs. Lines not in Go's format pass through to stderr.
"""
import re
import statistics
import sys
from collections import OrderedDict

rows = OrderedDict()
for line in sys.stdin:
    if not line.startswith("Benchmark"):
        sys.stderr.write(line)
        continue
    f = line.split()
    name = re.sub(r"-\d+$", "", f[0][len("Benchmark"):])
    vals = rows.setdefault(name, OrderedDict())
    vals.setdefault("runs", []).append(1)
    for i in range(2, len(f) - 1, 2):
        try:
            vals.setdefault(f[i + 1], []).append(float(f[i]))
        except ValueError:
            pass

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
