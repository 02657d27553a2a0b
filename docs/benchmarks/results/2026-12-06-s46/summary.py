#!/usr/bin/env python3
"""One line per many_queues JSON in this folder, in the order run: the figures the session-46 table
quotes, with phase 8 (the survivors idle while the killed node stays down). An argument names
another results folder to read instead of this one."""
import glob, json, os, sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))  # another session's folder
for path in sorted(glob.glob(os.path.join(here, '*.json')), key=os.path.getmtime):
    try:
        d = json.load(open(path))
    except ValueError:
        continue  # a run still going
    if d.get('tool') not in (None, 'many_queues') and 'quiet_kill' not in d:
        continue
    q = d.get('quiet_kill') or {}
    down = q.get('idle_with_the_node_down') or {}
    stores = q.get('survivors_store', [])
    print(f"{os.path.basename(path):20} created {d.get('create_s')} s, idle {d.get('idle_cpu_pct_of_core_total')}%, "
          f"stop {d.get('stop_all_led_by_others_s')} s, restart {d.get('restart_serve_all_s')} s, "
          f"kill after traffic {d.get('kill_failover_all_led_s')} s, "
          f"quiet kill {q.get('failover_all_led_s')} s ({q.get('led')} groups), "
          f"folds {[s.get('journal_folds') for s in stores]}, "
          f"idle with it down {down.get('cpu_pct_of_core_per_node')} = {down.get('cpu_pct_of_core_total')}% "
          f"({down.get('elections')} elections), KiB/group {d.get('rss_kib_per_group')}")
