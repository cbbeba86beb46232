#!/usr/bin/env python3
"""Footprint (issue 7, item 5): gpuwhy's CPU (% of one core) and peak RSS while it traces a
steady 50,000 events/s, next to the same agent idle.

Each repeat starts a fresh `gpuwhy trace`, then:
  idle phase    --idle-s seconds with no CUDA calls: the agent's floor (drain thread polling
                every ~1 ms, 1 Hz sampler, status line), the reference;
  load phase    gw_call_load at --rate cudaStreamSynchronize calls/s on the simulated runtime
                (2 rows per call: 25,000 calls/s = 50,000 events/s) for --load-s seconds;
                the agent's CPU is read from /proc/PID/stat (utime+stime) between 2 s after
                the load starts and 1 s before it ends.
Peak RSS is VmHWM from /proc/PID/status before stop. The recorded rate is checked from the
database (rows of the load's pid per second of load). The probes' own time is charged to the
traced process, not the agent (uprobes run in the caller): reported next to it as the load's
CPU traced vs the same load untraced in the same repeat.

Usage: sudo python3 bench/footprint.py [--build build] [--repeats 3]
"""

import argparse
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_run import (TraceRun, median_range, parse_report, proc_cpu_seconds,  # noqa: E402
                       proc_status_kb, run_report)


def load_cmd(a, rate, seconds):
    return [f"{a.build}/bench/gw_call_load", "--lib", f"{a.build}/sim/lib", "--rate", str(rate),
            "--seconds", str(seconds), "--threads", "1"]


def one_repeat(a, extra):
    untraced = run_report(load_cmd(a, a.rate, a.load_s), "gw_call_load")
    run = TraceRun(f"{a.build}/gpuwhy", f"{a.build}/sim/lib", os.path.join(a.out, "footprint.db"),
                   extra)
    c0 = proc_cpu_seconds(run.pid)
    time.sleep(a.idle_s)
    idle_core = (proc_cpu_seconds(run.pid) - c0) / a.idle_s
    load = subprocess.Popen(load_cmd(a, a.rate, a.load_s), stdout=subprocess.PIPE, text=True)
    time.sleep(2)
    c1, t1 = proc_cpu_seconds(run.pid), time.monotonic()
    time.sleep(a.load_s - 3)
    c2, t2 = proc_cpu_seconds(run.pid), time.monotonic()
    out, _ = load.communicate(timeout=60)
    traced = parse_report(out.strip().splitlines()[-1], "gw_call_load")
    hwm_mb = proc_status_kb(run.pid, "VmHWM") / 1024
    rss_mb = proc_status_kb(run.pid, "VmRSS") / 1024
    run.stop()
    rows = run.rows_by_op(int(traced["pid"]))
    session = run.session()
    run.cleanup()
    recorded = rows.get("cudaStreamSync", 0) + rows.get("cuStreamSync", 0)
    return {
        "idle_core": idle_core,
        "load_core": (c2 - c1) / (t2 - t1),
        "events_s": recorded / traced["seconds"],
        "expected": 2 * int(traced["calls"] + traced["warmup_calls"]),
        "recorded": recorded,
        "drops": session["drops"],
        "hwm_mb": hwm_mb,
        "rss_mb": rss_mb,
        "gen_untraced_core": untraced["cpu_s"] / untraced["seconds"],
        "gen_traced_core": traced["cpu_s"] / traced["seconds"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--rate", type=int, default=25000, help="calls/s (2 events per call)")
    p.add_argument("--idle-s", type=float, default=8)
    p.add_argument("--load-s", type=float, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="/var/tmp/gpuwhy-bench")
    p.add_argument("--variants", default="",
                   help="'|'-separated extra `gpuwhy trace` arguments measured alternately in "
                        "each repeat, e.g. '|--poll-interval 1ms' (default: one variant, none)")
    a = p.parse_args()
    variants = [v.split() for v in a.variants.split("|")]
    if os.geteuid() != 0:
        sys.exit("footprint: needs root (BPF)")
    os.makedirs(a.out, exist_ok=True)
    print(f"footprint: {os.uname().release}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, load {a.rate:,} calls/s "
          f"({2 * a.rate:,} events/s) for {a.load_s:g} s, {a.repeats} repeats")
    print(f"{'repeat':>6} {'variant':>24} {'events/s':>9} {'rec/exp':>17} {'drops':>5} "
          f"{'agent idle':>10} {'agent load':>10} {'peak RSS MB':>11} {'RSS MB':>6} {'gen untraced':>12} "
          f"{'gen traced':>10}")
    results = [[] for _ in variants]
    for r in range(a.repeats):
        for runs, extra in zip(results, variants):
            x = one_repeat(a, extra)
            runs.append(x)
            print(f"{r + 1:>6} {' '.join(extra) or 'default':>24} {x['events_s']:>9,.0f} "
                  f"{x['recorded']:>8,}/{x['expected']:<8,} {x['drops']:>5} "
                  f"{100 * x['idle_core']:>9.2f}% {100 * x['load_core']:>9.2f}% "
                  f"{x['hwm_mb']:>11.1f} {x['rss_mb']:>6.1f} "
                  f"{100 * x['gen_untraced_core']:>11.1f}% {100 * x['gen_traced_core']:>9.1f}%")
            sys.stdout.flush()

    for runs, extra in zip(results, variants):
        def line(name, key, scale=100, unit="%"):
            m = median_range([x[key] * scale for x in runs])
            print(f"  {name}: {m[0]:.2f}{unit} ({m[1]:.2f}–{m[2]:.2f})")

        print(f"\nsummary, trace {' '.join(extra) or '(defaults)'} (median, min–max)")
        line("agent CPU at load, % of a core (target ≤ 5%)", "load_core")
        line("agent CPU idle, % of a core (reference)", "idle_core")
        line("agent peak RSS, MB (target ≤ 150)", "hwm_mb", 1, " MB")
        line("recorded events/s", "events_s", 1, "")
        line("generator CPU untraced, % of a core", "gen_untraced_core")
        line("generator CPU traced (probes included), % of a core", "gen_traced_core")

if __name__ == "__main__":
    main()
