#!/usr/bin/env python3
"""What the on-CPU profile costs a traced thread: the BPF program's own run time per sample.

Runs a job whose main thread is always on the CPU (the simulated training loop building its
batches on the main thread, or any command after --) under `gpuwhy trace --profile-hz HZ` for
each rate, with kernel.bpf_stats_enabled=1, and reads the run count and run time of the
profile's program (gw_cpu_sample) from bpftool. Per rate it prints the samples taken, the mean
ns per sample (the timer interrupt's BPF work: stack capture, Python walk, ring record), and the
share of one CPU that is at that rate: samples/s per CPU × ns per sample. The perf event's own
interrupt (which the kernel takes for any cpu-clock sampler) is not in the BPF figure.

Usage (root): bench/profile_cost.py --gpuwhy build/gpuwhy --lib-dir build/sim/lib
                  [--rates 49,999] [--seconds 10] [-- CMD ...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def prog_stats(bpftool):
    out = subprocess.run([bpftool, "prog", "show", "--json"], capture_output=True, text=True,
                         check=True).stdout
    stats = {}
    for p in json.loads(out):
        if p.get("name") == "gw_cpu_sample":
            stats[p["id"]] = (p.get("run_cnt", 0), p.get("run_time_ns", 0))
    return stats


def main():
    argv = sys.argv[1:]
    cmd = None
    if "--" in argv:
        cmd = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpuwhy", required=True)
    ap.add_argument("--lib-dir", help="the simulated CUDA libraries (for the default job)")
    ap.add_argument("--rates", default="49,999")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--bpftool", default="bpftool")
    args = ap.parse_args(argv)
    if cmd is None:
        if not args.lib_dir:
            ap.error("--lib-dir is needed for the default job (or give a command after --)")
        cmd = [sys.executable, os.path.join(HERE, "..", "sim", "workloads", "train_loop.py"),
               "--lib-dir", args.lib_dir, "--duration", str(args.seconds),
               "--main-thread-batches", "--batch-cpu-ms", "20"]
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        before = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    rows = []
    try:
        for hz in [int(r) for r in args.rates.split(",")]:
            with tempfile.TemporaryDirectory() as tmp:
                db = os.path.join(tmp, "p.db")
                # bpftool reads the program while it is loaded: trace in the background and
                # read the counters just before it ends.
                trace = subprocess.Popen(
                    [args.gpuwhy, "trace", "--quiet", "--profile-hz", str(hz), "--db", db,
                     "--duration", "%ds" % (args.seconds + 2)] +
                    (["--cuda-lib", args.lib_dir] if args.lib_dir else []),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                import time
                time.sleep(1.5)
                job = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                stats = prog_stats(args.bpftool)
                trace.wait()
                cnt = sum(c for c, _ in stats.values())
                ns = sum(t for _, t in stats.values())
                q = subprocess.run([args.gpuwhy, "query", "--db", db, "--csv",
                                    "SELECT COUNT(*) FROM events WHERE op = 'cpu_sample'"],
                                   capture_output=True, text=True)
                kept = int(q.stdout.split()[-1]) if q.returncode == 0 else 0
                # Every firing runs the program; only a tracked thread's costs a capture. All of
                # the program's time over the kept samples bounds a kept sample's cost.
                per_kept = ns / kept if kept else 0
                rows.append({"hz": hz, "runs": cnt, "ns_per_run": ns / cnt if cnt else 0,
                             "samples": kept, "ns_per_sample_bound": per_kept,
                             "thread_share_pct": hz * per_kept / 1e7,
                             "job_rc": job.returncode})
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(before)
    print("%6s %8s %8s %9s %22s %22s" % ("hz", "runs", "ns/run", "samples", "ns/sample (bound)",
                                         "share of the thread"))
    for r in rows:
        print("%6d %8d %8.0f %9d %22.0f %21.4f%%" % (
            r["hz"], r["runs"], r["ns_per_run"], r["samples"], r["ns_per_sample_bound"],
            r["thread_share_pct"]))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
