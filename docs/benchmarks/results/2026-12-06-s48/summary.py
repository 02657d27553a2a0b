#!/usr/bin/env python3
"""One line per many_queues JSON in a results folder (this one by default), in the order run:
session 46's figures plus where the leaders were at each kill and how long the rebalance took
after each restart."""
import glob, json, os, sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(here, '*.json')), key=os.path.getmtime):
    try:
        d = json.load(open(path))
    except ValueError:
        continue  # a run still going
    q = d.get('quiet_kill') or {}
    down = q.get('idle_with_the_node_down') or {}
    print(f"{os.path.basename(path):18} created {d.get('create_s')} s, idle {d.get('idle_cpu_pct_of_core_total')}%, "
          f"stop {d.get('stop_all_led_by_others_s')} s, restart {d.get('restart_serve_all_s')} s "
          f"(balanced after {d.get('restart_rebalanced_s')} s), "
          f"kill after traffic {d.get('kill_failover_all_led_s')} s ({d.get('kill_node1_led')} groups), "
          f"quiet kill {q.get('failover_all_led_s')} s ({q.get('led')} groups; "
          f"balanced {q.get('rebalanced_after_restart_s')} s after the restart), "
          f"idle with it down {down.get('cpu_pct_of_core_total')}% ({down.get('elections')} elections), "
          f"KiB/group {d.get('rss_kib_per_group')}" + (f", ERROR {d['error']}" if 'error' in d else ''))
