#!/usr/bin/env python3
"""The agent's own cost tracing a Python training loop with many processes around it: two
gpuwhy binaries (a build before a change and after it) side by side, alternating in each round.

Each run is `gpuwhy trace FLAGS -- python3 sim/workloads/train_loop.py` (ctypes over the
simulated runtime: a main loop and DataLoader-style workers, Python frames for --stack). The
agent's CPU (utime+stime from /proc/PID/stat) is read over --window seconds starting --settle
seconds after it started, so start-up is left out; then the /proc/<pid>/maps files it opens in
3 s are counted with strace when strace is installed (after the CPU window: strace slows what
it watches). One JSON line per run, then the medians per binary.

Usage (root): python3 bench/agent_cost.py --gpuwhy build/gpuwhy [--baseline OLD/gpuwhy]
              [--flags=--stack] [--rounds 3] [--settle 6] [--window 10]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STRACE_S = 3


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def one_run(gpuwhy, flags, lib_dir, a, tmp):
    db = os.path.join(tmp, "agent_cost.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    duration = a.settle + a.window + STRACE_S + 4
    cmd = [gpuwhy, "trace", *flags, "--quiet", "--duration", f"{duration}s", "--db", db, "--",
           sys.executable, os.path.join(ROOT, "sim/workloads/train_loop.py"), "--duration",
           str(duration - 2), "--workers", "2", "--batch-cpu-ms", "1", "--kernels-per-step", "32",
           "--kernel-us", "20", "--lib-dir", lib_dir]
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(a.settle)
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), cpu_ticks(agent.pid)
    time.sleep(a.window)
    t1, c1 = time.monotonic(), cpu_ticks(agent.pid)
    maps_opens = -1
    if shutil.which("strace"):  # after the CPU window: strace slows what it watches
        trace = subprocess.run(["timeout", str(STRACE_S), "strace", "-f", "-e", "trace=openat",
                                "-p", str(agent.pid)], capture_output=True, text=True)
        maps_opens = sum(1 for line in trace.stderr.splitlines() if "/maps" in line)
    out, _ = agent.communicate(timeout=duration + 30)
    return {"gpuwhy": gpuwhy, "flags": " ".join(flags),
            "agent_cpu_pct": round(100.0 * (c1 - c0) / hz / (t1 - t0), 2),
            "maps_opens_per_s": round(maps_opens / STRACE_S, 1) if maps_opens >= 0 else None,
            "rc": agent.returncode,
            "note": next((l.strip() for l in out.splitlines() if "stacks:" in l), "")}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpuwhy", required=True)
    p.add_argument("--baseline", help="another gpuwhy binary, run alternately with --gpuwhy")
    p.add_argument("--flags", default="", help="trace flags, e.g. --flags=--stack")
    p.add_argument("--lib-dir", default=os.path.join(ROOT, "build/sim/lib"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--settle", type=float, default=6)
    p.add_argument("--window", type=float, default=10)
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("agent_cost.py: run as root (gpuwhy trace loads BPF programs)")
    binaries = [a.gpuwhy] + ([a.baseline] if a.baseline else [])
    flags = a.flags.split()
    results = {b: [] for b in binaries}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = binaries if r % 2 == 0 else list(reversed(binaries))
            for b in order:
                run = one_run(b, flags, a.lib_dir, a, tmp)
                print(json.dumps(run), flush=True)
                results[b].append(run)
    for b, runs in results.items():
        cpu = [r["agent_cpu_pct"] for r in runs]
        maps = [r["maps_opens_per_s"] for r in runs if r["maps_opens_per_s"] is not None]
        print(json.dumps({"gpuwhy": b, "runs": len(runs),
                          "agent_cpu_pct_median": statistics.median(cpu),
                          "agent_cpu_pct_range": [min(cpu), max(cpu)],
                          "maps_opens_per_s_median": statistics.median(maps) if maps else None}))


if __name__ == "__main__":
    main()
