#!/usr/bin/env python3
"""Instructions per iteration by function, from two callgrind runs of
different lengths: (run B - run A) / N for each function, so start-up and
shutdown cancel out.

    scripts/callgrind-delta.py SHORT.out LONG.out N [TOP]

Prints the TOP (60) functions by inclusive cost (the function and all it
calls) and by self cost (its own instructions), per iteration, with the
share of the total. Uses callgrind_annotate.
"""
import re
import subprocess
import sys

LINE = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)")
NOISE = re.compile(r"/root/\.cargo/registry/src/[^/]+/|/rustc/[0-9a-f]+/")


def load(path, inclusive):
    text = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
         "--threshold=100", "--auto=no", path],
        capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            name = NOISE.sub("", m.group(2).strip())
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def main():
    short, long_, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    for inclusive in (True, False):
        a, b = load(short, inclusive), load(long_, inclusive)
        rows = sorted(((b.get(k, 0) - a.get(k, 0)) / n, k) for k in set(a) | set(b))
        total = (b.get("PROGRAM TOTALS", 0) - a.get("PROGRAM TOTALS", 0)) / n or 1
        print(f"== {'inclusive' if inclusive else 'self'} instructions per iteration ==")
        for cost, name in reversed(rows[-top:]):
            print(f"{cost:10.0f} {100 * cost / total:5.1f}%  {name[:150]}")
        print()


main()
