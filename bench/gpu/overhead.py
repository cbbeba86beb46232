"""Paired, alternating overhead measurement of gpuwhy on a real training loop (issue 7).

One training process runs for the whole measurement and logs the end time of every step.
Meanwhile this controller cycles through short phases — untraced, `gpuwhy trace`,
`gpuwhy trace --stack`, `gpuwhy trace --launch-duty 1` (gpuwhy_exact: every launch counted),
and the bare mechanism (empty uprobe+uretprobe pairs on the same
functions) — in rotating order. Each phase's throughput comes from the steps that ended inside
it (after a settle period for attach/detach; with the default launch duty cycle of 10 s, a
measured part of 10 s holds exactly one counting second), and each traced phase is compared with the
untraced phases on either side of it, so the loop's slow drift cancels out. Two metrics per
phase: throughput (steps/s) and the main thread's CPU time per step (/proc/PID/schedstat, ns:
the thread that makes the CUDA calls, so the one that pays for the probes). Each mode reports the mean loss over its phases with a 95% bootstrap
confidence interval (10,000 resamples of the per-phase ratios, fixed seed): many short phases
resolve what a few long ones cannot, because the loop's own drift is slow next to a phase.

Usage (as root):
  python3 overhead.py --gpuwhy ./gpuwhy --bare ./gw_bare_probes --out DIR
                      [--phase 12] [--settle 3] [--rounds 8] [--modes untraced,gpuwhy,bare]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

RUNTIME_SYMBOLS = ("cudaLaunchKernel,cudaLaunchKernelExC,cudaMalloc,cudaMallocAsync,cudaFree,"
                   "cudaFreeAsync,cudaMemcpy,cudaMemcpyAsync,cudaMemsetAsync,cudaStreamSynchronize,"
                   "cudaDeviceSynchronize,cudaEventSynchronize,cudaStreamWaitEvent,cudaGraphLaunch")
DRIVER_SYMBOLS = ("cuLaunchKernel,cuLaunchKernelEx,cuMemAlloc_v2,cuMemFree_v2,cuMemcpyHtoDAsync_v2,"
                  "cuMemcpyDtoHAsync_v2,cuMemcpyAsync,cuStreamSynchronize,cuCtxSynchronize,"
                  "cuEventSynchronize,cuModuleGetFunction,cuLibraryGetKernel")


def mapped_cuda_libs(pid):
    rt = drv = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            path = line.split()[-1] if "/" in line else ""
            base = os.path.basename(path)
            if base.startswith("libcudart.so"):
                rt = path
            elif base.startswith("libcuda.so"):
                drv = path
    return rt, drv


def steps_between(log, t0, t1):
    n = 0
    with open(log) as f:
        for line in f:
            if line.startswith("#"):
                continue
            t = int(line)
            if t0 <= t < t1:
                n += 1
    return n


def agent_usage(pid):
    """(CPU seconds used so far, peak RSS in MB) of a running agent, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{pid}/status") as f:
            hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        return cpu_s, hwm / 1024.0
    except (OSError, StopIteration, IndexError, ValueError):
        return None, None


def process_cpu_s(pid):
    """CPU seconds of the process's main thread (the one that launches), in ns resolution
    (/proc/PID/schedstat: time on CPU)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def mean_ci(values, resamples=10000, seed=1):
    """Mean and 95% bootstrap percentile interval of `values`."""
    import random
    rng = random.Random(seed)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    return statistics.fmean(values), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


def start_mode(mode, args, pid, rt, drv, out, idx):
    if mode == "untraced":
        return None
    if mode == "bare":
        cmd = [args.bare, "--lib", rt, "--symbols", RUNTIME_SYMBOLS]
        if drv:
            cmd += ["--lib", drv, "--symbols", DRIVER_SYMBOLS]
    else:
        cmd = [args.gpuwhy, "trace", "--quiet", "--db", os.path.join(out, f"phase{idx}.db")]
        if mode == "gpuwhy_stack":
            cmd.append("--stack")
        if mode == "gpuwhy_exact":  # every launch counted (no launch duty cycle)
            cmd += ["--launch-duty", "1"]
    log = open(os.path.join(out, f"phase{idx}_{mode}.log"), "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpuwhy", required=True)
    p.add_argument("--bare", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--phase", type=float, default=12)
    p.add_argument("--settle", type=float, default=3)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--modes", default="untraced,gpuwhy,bare")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--train-arg", action="append", default=[],
                   help="passed on to torch_train.py (e.g. --train-arg=--d-model=2048)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    modes = args.modes.split(",")
    steps_log = os.path.join(args.out, "steps.txt")
    # Each phase also waits for detach (1 s) and the tracer's exit; warm-up takes up to a minute.
    total = args.rounds * len(modes) * (args.phase + 3) + 120
    train = subprocess.Popen([sys.executable, os.path.join(HERE, "torch_train.py"), "--duration",
                              str(total), "--log", steps_log, "--workers", str(args.workers)]
                             + args.train_arg)
    # Warm up: wait for steady steps (CUDA context, cuBLAS handles, workers).
    while not os.path.exists(steps_log) or steps_between(steps_log, 0, 1 << 62) < 200:
        if train.poll() is not None:
            sys.exit("training exited early")
        time.sleep(1)
    rt, drv = mapped_cuda_libs(train.pid)
    print(f"training pid {train.pid}; libcudart {rt}; libcuda {drv}", flush=True)
    phases = []
    idx = 0
    # A time limit (SIGTERM) or Ctrl-C ends the phases early; the summary covers those done.
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for r in range(args.rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for mode in order:
                proc = start_mode(mode, args, train.pid, rt, drv, args.out, idx)
                t0 = time.monotonic_ns() + int(args.settle * 1e9)
                time.sleep(args.settle)
                cpu0, _ = agent_usage(proc.pid) if proc is not None else (None, None)
                train_cpu0 = process_cpu_s(train.pid)
                time.sleep(args.phase - args.settle)
                t1 = time.monotonic_ns()
                train_cpu1 = process_cpu_s(train.pid)
                cpu1, rss = agent_usage(proc.pid) if proc is not None else (None, None)
                agent = {}
                if cpu0 is not None and cpu1 is not None:
                    agent = {"agent_cpu_pct": 100 * (cpu1 - cpu0) / ((t1 - t0) / 1e9),
                             "agent_peak_rss_mb": rss}
                if proc is not None:
                    proc.send_signal(signal.SIGINT)
                    proc.wait(timeout=60)
                n = steps_between(steps_log, t0, t1)
                phases.append({"mode": mode, "t0": t0, "t1": t1, "steps": n,
                               "steps_per_s": n / ((t1 - t0) / 1e9),
                               "train_cpu_ms_per_step": 1e3 * (train_cpu1 - train_cpu0) / n if n else 0,
                               **agent})
                print(f"phase {idx:3d} {mode:13s} {phases[-1]['steps_per_s']:8.2f} steps/s", flush=True)
                idx += 1
                time.sleep(1)  # detach fully before the next phase starts its clock
    except KeyboardInterrupt:
        print(f"interrupted after {len(phases)} phases", flush=True)
    train.send_signal(signal.SIGINT)
    try:
        train.wait(timeout=30)
    except subprocess.TimeoutExpired:
        train.kill()
    # Each non-untraced phase against the mean of the nearest untraced phase before and after.
    ratios = {m: [] for m in modes if m != "untraced"}
    cpu_ratios = {m: [] for m in modes if m != "untraced"}
    for i, ph in enumerate(phases):
        if ph["mode"] == "untraced":
            continue
        before = next((q for q in reversed(phases[:i]) if q["mode"] == "untraced"), None)
        after = next((q for q in phases[i + 1:] if q["mode"] == "untraced"), None)
        refs = [q["steps_per_s"] for q in (before, after) if q and q["steps_per_s"] > 0]
        if refs and ph["steps_per_s"] > 0:
            ratios[ph["mode"]].append(ph["steps_per_s"] / statistics.mean(refs))
        crefs = [q["train_cpu_ms_per_step"] for q in (before, after)
                 if q and q["train_cpu_ms_per_step"] > 0]
        if crefs and ph["train_cpu_ms_per_step"] > 0:
            cpu_ratios[ph["mode"]].append(ph["train_cpu_ms_per_step"] / statistics.mean(crefs))
    summary = {}
    for m, rs in ratios.items():
        if rs:
            mean, lo, hi = mean_ci([100 * (1 - r) for r in rs])
            summary[m] = {"phases": len(rs), "median_ratio": statistics.median(rs),
                          "min": min(rs), "max": max(rs),
                          "median_loss_pct": 100 * (1 - statistics.median(rs)),
                          "mean_loss_pct": mean, "loss_ci95_pct": [lo, hi]}
            if cpu_ratios[m]:
                cmean, clo, chi = mean_ci([100 * (r - 1) for r in cpu_ratios[m]])
                summary[m]["train_cpu_per_step_increase_pct"] = cmean
                summary[m]["train_cpu_per_step_ci95_pct"] = [clo, chi]
            cpu = [q["agent_cpu_pct"] for q in phases if q["mode"] == m and "agent_cpu_pct" in q]
            rss = [q["agent_peak_rss_mb"] for q in phases if q["mode"] == m and "agent_peak_rss_mb" in q]
            if cpu:
                summary[m]["agent_cpu_pct_median"] = statistics.median(cpu)
                summary[m]["agent_peak_rss_mb_max"] = max(rss)
    untraced = [q["steps_per_s"] for q in phases if q["mode"] == "untraced" and q["steps_per_s"] > 0]
    summary["untraced_steps_per_s"] = {"median": statistics.median(untraced), "min": min(untraced),
                                       "max": max(untraced)}
    with open(os.path.join(args.out, "overhead.json"), "w") as f:
        json.dump({"phases": phases, "summary": summary}, f, indent=1)
    print(json.dumps(summary, indent=1))
    for m, v in summary.items():
        if "mean_loss_pct" in v:
            print(f"{m:13s} throughput loss {v['mean_loss_pct']:+.2f}% "
                  f"[{v['loss_ci95_pct'][0]:+.2f}, {v['loss_ci95_pct'][1]:+.2f}] over "
                  f"{v['phases']} phases; CPU/step "
                  f"{v.get('train_cpu_per_step_increase_pct', float('nan')):+.2f}% "
                  f"{[round(x, 2) for x in v.get('train_cpu_per_step_ci95_pct', [])]}")


if __name__ == "__main__":
    main()
