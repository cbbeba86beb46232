#!/usr/bin/env python3
"""End to end (issue 7, item 6): the simulated training loop's throughput traced vs untraced,
in paired runs that alternate order.

Each pair runs sim/bin/gw_train_loop --duration --seconds --report twice, once untraced and
once while `gpuwhy trace` (default options, started and attached before the loop starts,
stopped after it ends) records it; pair i runs untraced first when i is even, traced first
when it is odd, so drift on this shared machine does not favour one side. The figure is the
per-pair ratio traced samples/s ÷ untraced samples/s; reported: every ratio, the median and
the spread, per workload configuration.

Configurations (--configs; all gw_train_loop flags):
  default        2 DataLoader workers, 8 kernels × 1 ms per step, sync every step: device-bound
                 like a healthy job; few CUDA calls per second
  launch-bound   64 kernels × 20 µs per step, 1 ms of CPU per batch: the main thread's CUDA
                 calls (and their probes) are on the critical path

Usage: sudo python3 bench/train_overhead.py [--build build] [--pairs 6] [--seconds 6]
"""

import argparse
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_run import TraceRun, median_range, run_report  # noqa: E402

CONFIGS = {
    "default": [],
    "launch-bound": ["--kernels-per-step", "64", "--kernel-us", "20", "--batch-cpu-ms", "1"],
}


def train(a, flags):
    return run_report([f"{a.build}/sim/bin/gw_train_loop", "--duration", str(a.seconds),
                       "--report", *flags], "gw_train_loop")


def traced_train(a, flags):
    run = TraceRun(f"{a.build}/gpuwhy", f"{a.build}/sim/lib", os.path.join(a.out, "train.db"))
    try:
        report = train(a, flags)
    finally:
        run.stop()
    session = run.session()
    run.cleanup()
    return report, session


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--configs", default="default,launch-bound")
    p.add_argument("--out", default="/var/tmp/gpuwhy-bench")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("train_overhead: needs root (BPF)")
    os.makedirs(a.out, exist_ok=True)
    print(f"train overhead: {os.uname().release}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {a.pairs} pairs × "
          f"{a.seconds:g} s per run")
    summary = []
    for name in a.configs.split(","):
        flags = CONFIGS[name]
        print(f"\n{name}: gw_train_loop {' '.join(flags) or '(defaults)'}")
        print(f"{'pair':>4} {'order':>16} {'untraced/s':>10} {'traced/s':>10} {'ratio':>6} "
              f"{'rows':>8} {'drops':>5}")
        ratios = []
        for i in range(a.pairs):
            if i % 2 == 0:
                base = train(a, flags)
                traced, session = traced_train(a, flags)
                order = "untraced,traced"
            else:
                traced, session = traced_train(a, flags)
                base = train(a, flags)
                order = "traced,untraced"
            ratio = traced["samples_per_s"] / base["samples_per_s"]
            ratios.append(ratio)
            print(f"{i + 1:>4} {order:>16} {base['samples_per_s']:>10.1f} "
                  f"{traced['samples_per_s']:>10.1f} {ratio:>6.3f} {session['events']:>8,} "
                  f"{session['drops']:>5}")
            sys.stdout.flush()
        m = median_range(ratios)
        summary.append((name, m))
    print("\nsummary: traced ÷ untraced samples/s, median (min–max)")
    for name, m in summary:
        print(f"  {name}: {m[0]:.3f} ({m[1]:.3f}–{m[2]:.3f}), loss {100 * (1 - m[0]):.1f}%")


if __name__ == "__main__":
    main()
