#!/usr/bin/env python3
"""Capture capacity (issue 7, item 2): the highest sustained event rate that `gpuwhy trace`
records with zero drops, end to end, and where it stops.

Two paths, each stepped up in rate, each step a fresh `gpuwhy trace` (stopped with SIGINT):

A. Real probes. gw_call_load calls cudaStreamSynchronize on the simulated runtime (2 rows per
   call: the runtime call and its nested cuStreamSynchronize) paced to a rate, then unpaced
   ("max"). Recorded = rows of the load's pid for those two ops; expected = 2 × calls made.
   References measured in the same repeat: the load's unpaced call rate untraced and under
   empty uprobe+uretprobe pairs on the same two functions (gw_bare_probes) — the mechanism's
   own ceiling on this machine.
B. User-space half. gw_ring_inject writes synthetic cuStreamSync records straight into the
   running gpuwhy's CUDA ring buffer (BPF program sharing gpuwhy's ring and drop counters) at a
   rate: ring buffer → decoder → store without uprobes in front. Recorded = rows of the
   injector's pid; expected = records emitted; drops = gpuwhy's own cuda_bpf_reserve counter.

A step passes when drops are 0, every expected row is in the database, and gpuwhy stops
within --max-stop-s of SIGINT (a longer stop means a backlog was still queued: the rate was
not keeping up, only buffered). Capacity = the highest passing rate; medians over repeats.

Usage: sudo python3 bench/capture_capacity.py [--build build] [--seconds 10] [--repeats 3]
"""

import argparse
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_run import (TraceRun, median_range, proc_cpu_seconds,  # noqa: E402
                       proc_status_kb, run_report, thread_cpu_seconds)

SYNC_OPS = ("cudaStreamSync", "cuStreamSync")


def call_load(b, rate, seconds, threads):
    return run_report([f"{b}/bench/gw_call_load", "--lib", f"{b}/sim/lib", "--rate", str(rate),
                       "--seconds", str(seconds), "--threads", str(threads)], "gw_call_load")


def bare_reference(b, seconds, threads):
    bare = subprocess.Popen(
        [f"{b}/bench/gw_bare_probes", "--lib", f"{b}/sim/lib/libcudart.so.13", "--symbols",
         "cudaStreamSynchronize", "--lib", f"{b}/sim/lib/libcuda.so.1", "--symbols",
         "cuStreamSynchronize"], stderr=subprocess.PIPE, text=True)
    line = bare.stderr.readline()
    if "2 pairs attached" not in line:
        bare.kill()
        raise RuntimeError("gw_bare_probes: " + line)
    try:
        return call_load(b, 0, seconds, threads)
    finally:
        bare.send_signal(signal.SIGINT)
        bare.wait(timeout=60)


def traced_call_step(a, rate):
    b = a.build
    run = TraceRun(f"{b}/gpuwhy", f"{b}/sim/lib", os.path.join(a.out, "capacity.db"))
    load = call_load(b, rate, a.seconds, a.threads)
    stop_s = run.stop()
    rows = run.rows_by_op(int(load["pid"]))
    session = run.session()
    run.cleanup()
    expected = 2 * int(load["calls"] + load["warmup_calls"])
    recorded = sum(rows.get(op, 0) for op in SYNC_OPS)
    return {"target": rate, "calls_s": load["rate"], "events_s": 2 * load["rate"],
            "expected": expected, "recorded": recorded, "drops": session["drops"],
            "stop_s": stop_s, "load_cpu_s": load["cpu_s"],
            "ok": session["drops"] == 0 and recorded == expected and stop_s <= a.max_stop_s}


def inject_step(a, rate):
    b = a.build
    run = TraceRun(f"{b}/gpuwhy", f"{b}/sim/lib", os.path.join(a.out, "capacity.db"))
    cpu0 = proc_cpu_seconds(run.pid)
    threads0 = thread_cpu_seconds(run.pid)
    inj = run_report([f"{b}/bench/gw_ring_inject", "--pid", str(run.pid), "--rate", str(rate),
                      "--seconds", str(a.seconds)], "gw_ring_inject")
    agent_cpu = proc_cpu_seconds(run.pid) - cpu0
    threads1 = thread_cpu_seconds(run.pid)
    # Busiest threads over the injection, % of a core each, labelled tid − pid.
    busy = sorted(((threads1[k] - threads0.get(k, 0)) / inj["seconds"], k[0], k[1])
                  for k in threads1)[::-1][:3]
    hwm_mb = proc_status_kb(run.pid, "VmHWM") / 1024
    stop_s = run.stop()
    rows = run.rows_by_op(int(inj["pid"]))
    session = run.session()
    run.cleanup()
    recorded = rows.get("cuStreamSync", 0)
    drops = session["drops_detail"].get("cuda_bpf_reserve", 0)
    return {"target": rate, "events_s": inj["rate"], "expected": int(inj["emitted"]),
            "recorded": recorded, "drops": drops, "all_drops": session["drops"],
            "failed": int(inj["reserve_failed"]), "stop_s": stop_s,
            "agent_core": agent_cpu / inj["seconds"], "hwm_mb": hwm_mb,
            "threads": " ".join(f"{tid - run.pid}:{100 * c:.0f}%" for c, tid, _ in busy),
            "ok": drops == 0 and recorded == int(inj["emitted"]) and stop_s <= a.max_stop_s}


def print_steps(title, steps, inject):
    print(f"\n{title}")
    if inject:
        print(f"{'target/s':>10} {'emitted/s':>10} {'emitted':>10} {'recorded':>10} "
              f"{'drops':>9} {'stop s':>6} {'agent core':>10} {'peak MB':>7}  ok  "
              f"busiest threads (tid-pid:%core)")
        for s in steps:
            print(f"{s['target']:>10,} {s['events_s']:>10,.0f} {s['expected']:>10,} "
                  f"{s['recorded']:>10,} {s['drops']:>9,} {s['stop_s']:>6.2f} "
                  f"{100 * s['agent_core']:>9.0f}% {s['hwm_mb']:>7.0f}  {'yes' if s['ok'] else 'NO':<3} "
                  f"{s['threads']}")
    else:
        print(f"{'target/s':>10} {'calls/s':>10} {'events/s':>10} {'expected':>10} "
              f"{'recorded':>10} {'drops':>7} {'stop s':>6}  ok")
        for s in steps:
            target = "max" if s["target"] == 0 else f"{s['target']:,}"
            print(f"{target:>10} {s['calls_s']:>10,.0f} {s['events_s']:>10,.0f} "
                  f"{s['expected']:>10,} {s['recorded']:>10,} {s['drops']:>7,} "
                  f"{s['stop_s']:>6.2f}  {'yes' if s['ok'] else 'NO'}")
    sys.stdout.flush()


def capacity(steps):
    """Highest passing rate below the first failing one (measured events/s)."""
    best = 0.0
    for s in sorted(steps, key=lambda s: s["target"] or float("inf")):
        if not s["ok"]:
            break
        best = s["events_s"]
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="gw_call_load threads")
    p.add_argument("--call-rates", default="25000,50000,75000",
                   help="paced cudaStreamSynchronize calls/s (2 events each); max is added")
    p.add_argument("--inject-rates",
                   default="200000,400000,600000,700000,800000,900000,1000000,1200000")
    p.add_argument("--max-stop-s", type=float, default=1.5)
    p.add_argument("--out", default="/var/tmp/gpuwhy-bench")
    p.add_argument("--skip-calls", action="store_true")
    p.add_argument("--skip-inject", action="store_true")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("capture_capacity: needs root (BPF)")
    os.makedirs(a.out, exist_ok=True)
    print(f"capture capacity: {os.uname().release}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {a.seconds:g} s per step, "
          f"{a.repeats} repeats")

    call_caps, none_rates, bare_rates, inject_caps, max_ratios = [], [], [], [], []
    for r in range(a.repeats):
        if not a.skip_calls:
            none = call_load(a.build, 0, a.seconds, a.threads)
            bare = bare_reference(a.build, a.seconds, a.threads)
            steps = [traced_call_step(a, rate) for rate in map(int, a.call_rates.split(","))]
            steps.append(traced_call_step(a, 0))
            print(f"\n[repeat {r + 1}] A. real probes, gw_call_load x{a.threads} threads; "
                  f"unpaced reference: untraced {none['rate']:,.0f} calls/s, bare pairs "
                  f"{bare['rate']:,.0f} calls/s ({2 * bare['rate']:,.0f} pair hits/s)")
            print_steps("", steps, inject=False)
            none_rates.append(none["rate"])
            bare_rates.append(bare["rate"])
            call_caps.append(capacity(steps))
            max_ratios.append(steps[-1]["calls_s"] / bare["rate"])
        if not a.skip_inject:
            steps = []
            for rate in map(int, a.inject_rates.split(",")):
                steps.append(inject_step(a, rate))
                if sum(not s["ok"] for s in steps) >= 2:
                    break  # two failing rates: past capacity
            print_steps(f"[repeat {r + 1}] B. ring injection (ring → decoder → store)", steps,
                        inject=True)
            inject_caps.append(capacity(steps))

    print("\nsummary (medians over repeats, min–max)")
    if call_caps:
        m = median_range(call_caps)
        n = median_range(none_rates)
        bb = median_range(bare_rates)
        print(f"  A. real probes: zero-drop events/s {m[0]:,.0f} ({m[1]:,.0f}–{m[2]:,.0f}); "
              f"generator untraced {n[0]:,.0f} calls/s; under bare pairs {bb[0]:,.0f} calls/s "
              f"= {2 * bb[0]:,.0f} probe pairs/s")
        r = median_range(max_ratios)
        print(f"     unpaced calls/s under gpuwhy ÷ under bare pairs: {r[0]:.2f} "
              f"({r[1]:.2f}–{r[2]:.2f})")
    if inject_caps:
        m = median_range(inject_caps)
        print(f"  B. ring → decoder → store: zero-drop events/s {m[0]:,.0f} "
              f"({m[1]:,.0f}–{m[2]:,.0f}); target 1,000,000")


if __name__ == "__main__":
    main()
