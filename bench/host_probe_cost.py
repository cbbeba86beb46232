#!/usr/bin/env python3
"""What gpuwhy's host probes cost per wake-up: the scheduler programs (sched_switch with the
waker on the sleeper's row, sched_waking) and the interrupt-context counters (irq, softirq and
hrtimer entry/exit, which make a wake-up from an interrupt read as waker 0).

Load: gw_wake_pingpong, two processes on one CPU passing a byte over pipes (per round trip: 2
wake-ups, 4 context switches). Rounds alternate, in one run:
  none    no probes
  bare    gw_bare_probes --sched: empty programs on the same tracepoints (the mechanism's floor)
  gpuwhy  gpuwhy trace --comm gw_pingpong (everything it attaches; the ping-pong is tracked)
Reported: median (min–max) ns per round trip per mode, and with kernel.bpf_stats_enabled the
run count and ns per run of each gpuwhy host program during its rounds (bpftool), plus the
interrupt rate of the machine during the gpuwhy rounds (irq programs run on every interrupt,
tracked process or not).

  sudo python3 bench/host_probe_cost.py --build build [--rounds 5] [--trips 200000]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_run import median_range, run_report  # noqa: E402

HOST_PROGS = ("gw_sched_switch", "gw_sched_waking", "gw_irq_entry", "gw_irq_exit",
              "gw_softirq_entry", "gw_softirq_exit", "gw_hrtimer_entry", "gw_hrtimer_exit")


def prog_stats():
    """{name: (run_cnt, run_time_ns)} of every loaded BPF program, from bpftool ({} without
    bpftool: the round-trip times are then the whole result)."""
    if shutil.which("bpftool") is None:
        return {}
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True,
                         check=True).stdout
    stats = {}
    for p in json.loads(out):
        name = p.get("name", "")
        cnt, ns = stats.get(name, (0, 0))
        stats[name] = (cnt + p.get("run_cnt", 0), ns + p.get("run_time_ns", 0))
    return stats


def interrupts():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("intr "):
                return int(line.split()[1])
    return 0


def start_and_wait(cmd, marker):
    """Starts a helper, keeps its output drained, and returns once `marker` appeared in it (the
    helper is attached then)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    ready = threading.Event()

    def pump():
        for line in proc.stdout:
            seen.append(line)
            if marker in line:
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(60) or proc.poll() is not None:
        proc.kill()
        raise RuntimeError(f"{cmd[0]} did not start: {''.join(seen)}")
    time.sleep(0.5)  # first polls of the drain thread
    return proc


def stop(proc):
    proc.send_signal(2)
    proc.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trips", type=int, default=200000)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("host_probe_cost.py loads BPF programs: run it as root")
    gpuwhy = os.path.join(args.build, "gpuwhy")
    bare = os.path.join(args.build, "bench", "gw_bare_probes")
    load = [os.path.join(args.build, "bench", "gw_wake_pingpong"), str(args.trips)]
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    db_dir = tempfile.mkdtemp(prefix="gw_host_probe_cost.")
    db = os.path.join(db_dir, "cost.db")
    ns = {"none": [], "bare": [], "gpuwhy": []}
    per_prog = {}
    irq_count, irq_s = 0, 0.0
    try:
        for r in range(args.rounds):
            for mode in ("none", "bare", "gpuwhy"):
                helper = None
                if mode == "bare":
                    helper = start_and_wait([bare, "--sched"], "attached")
                elif mode == "gpuwhy":
                    helper = start_and_wait([gpuwhy, "trace", "--comm", "gw_pingpong", "--db", db],
                                            "tracing")
                    before, irq0, t0 = prog_stats(), interrupts(), time.monotonic()
                try:
                    rep = run_report(load, "wake_pingpong")
                finally:
                    if mode == "gpuwhy":
                        after, irq1 = prog_stats(), interrupts()
                        irq_count += irq1 - irq0
                        irq_s += time.monotonic() - t0
                        for name in HOST_PROGS:
                            # bpftool prints the BTF name, else the kernel's 15 characters
                            c0, n0 = before.get(name, before.get(name[:15], (0, 0)))
                            c1, n1 = after.get(name, after.get(name[:15], (0, 0)))
                            acc = per_prog.setdefault(name, [0, 0])
                            acc[0] += c1 - c0
                            acc[1] += n1 - n0
                    if helper is not None:
                        stop(helper)
                ns[mode].append(rep["ns_per_round_trip"])
            print(f"round {r + 1}: " + "  ".join(f"{m} {v[-1]:.0f}" for m, v in ns.items()),
                  flush=True)
    finally:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.unlink(db + suffix)
        os.rmdir(db_dir)
    print(f"\nns per round trip (2 wake-ups, 4 switches), median (min–max) of {args.rounds} rounds "
          f"× {args.trips:,} trips:")
    base = median_range(ns["none"])[0]
    for mode, values in ns.items():
        med, lo, hi = median_range(values)
        print(f"  {mode:7} {med:8.0f} ({lo:.0f}–{hi:.0f})   +{med - base:.0f} ns vs none")
    if shutil.which("bpftool") is None:
        print("\nper-program run counts and times: not measured (no bpftool on this machine)")
    else:
        print("\ngpuwhy host programs during its rounds (kernel.bpf_stats_enabled):")
        print(f"  {'program':18} {'runs':>12} {'ns/run':>8}")
        for name, (cnt, t) in per_prog.items():
            print(f"  {name:18} {cnt:12,} {t / cnt if cnt else 0:8.0f}")
    print(f"\ninterrupts on this machine during the gpuwhy rounds: {irq_count / irq_s:,.0f}/s")


if __name__ == "__main__":
    main()
