#!/usr/bin/env python3
"""One line per many_queues JSON in this folder: the figures the session-45 table quotes.

The dip is how many groups the survivors stopped leading between the quiet kill's
highest count before the end and the lowest after it (0: the count only rose)."""
import glob, json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
paths = glob.glob(os.path.join(here, '*-10000.json')) + glob.glob(os.path.join(here, '*-1000.json'))
for path in sorted(paths, key=os.path.getmtime):
    try:
        d = json.load(open(path))
    except ValueError:
        continue  # a run still going
    q = d.get('quiet_kill') or {}
    trace = [n for _, n in q.get('led_by_the_others_over_time', [])]
    dip, peak = 0, 0
    for n in trace:
        peak = max(peak, n)
        dip = max(dip, peak - n)
    stores = q.get('survivors_store', [])
    print(f"{os.path.basename(path):22} created {d.get('create_s')} s, idle {d.get('idle_cpu_pct_of_core_total')}%, "
          f"elections {d.get('idle_elections')}, stop {d.get('stop_all_led_by_others_s')} s, "
          f"restart {d.get('restart_serve_all_s')} s, kill after traffic {d.get('kill_failover_all_led_s')} s, "
          f"quiet kill {q.get('failover_all_led_s')} s ({q.get('led')} groups, dip {dip}), "
          f"folds {[s.get('journal_folds') for s in stores]}, KiB/group {d.get('rss_kib_per_group')}")
