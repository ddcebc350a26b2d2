#!/usr/bin/env python3
"""Summarises a prefetch service's history (history.jsonl of `boot service` or `login service`),
for bench/boot-service.sh and bench/login-service.sh: each start's role, time, share of the plan
used and decision; then the starts with the plan against the cold ones among the first BEFORE
rows (ratio of medians, 95% bootstrap interval, by $BENCH_STATS), the cold ones taken three ways:
the verification's starts without the plan, the learning ones, and both; and the slowest start
against the median of the cold ones (both kinds).

    python3 bench/service-history.py HISTORY [--before N] [--noun boot]
"""

import argparse
import json
import os
import subprocess


def median(values):
    values = sorted(values)
    half = len(values) // 2
    return values[half] if len(values) % 2 else (values[half - 1] + values[half]) / 2


def ratio(a, b):
    out = subprocess.run([os.environ["BENCH_STATS"], "median-ratio", ",".join(map(str, a)), ",".join(map(str, b))],
                         capture_output=True, text=True).stdout.split()
    return tuple(map(float, out)) if len(out) == 3 else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("history")
    parser.add_argument("--before", type=int, help="compare among the first N rows (those before an upgrade)")
    parser.add_argument("--noun", default="boot")
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.history)]
    for i, r in enumerate(rows, 1):
        t, used = r["target_s"], r.get("plan_used")
        print(f"  {i:2} {r['role']:<13} {('%.2f s' % t) if t else 'not reached':>11}  plan used "
              f"{('%3.0f%%' % (100 * used)) if used is not None else '   —'}  {r['state']}: {r['reason'][:90]}")
    first = rows[: args.before or len(rows)]

    def times(*roles):
        return [r["target_s"] for r in first if r["role"] in roles and r["target_s"]]

    withp = times("with-plan")
    for label, cold in [("without the plan", times("without-plan")), ("learning", times("learn")),
                        ("learning and without", times("learn", "without-plan"))]:
        if not cold:
            continue
        print(f"cold ({label}): {len(cold)} {args.noun}s, median {median(cold):.2f} s")
        found = ratio(withp, cold) if withp and len(cold) > 1 else None
        if found:
            print(f"  with the plan: {len(withp)} {args.noun}s, {found[0]:.3f}x of cold ({label}) "
                  f"[{found[1]:.3f} … {found[2]:.3f}] (ratio of medians)")
    cold = times("learn", "without-plan")
    if cold:
        t, i = max((r["target_s"] or 0, i) for i, r in enumerate(rows, 1))
        print(f"slowest {args.noun}: {args.noun} {i} ({rows[i - 1]['role']}), {t:.2f} s = "
              f"{t / median(cold):.3f}x the cold median (learning and without)")

    if args.before and len(rows) > args.before:
        after = list(enumerate(rows[args.before:], args.before + 1))
        print(f"after the upgrade: learning {args.noun}s {[i for i, r in after if r['role'] == 'learn'] or 'none'}; "
              f"with the plan {[i for i, r in after if r['role'] == 'with-plan']}")


if __name__ == "__main__":
    main()
