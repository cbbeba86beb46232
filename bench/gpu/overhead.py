"""Paired, alternating overhead measurement of gpuwhy on a real training loop (issue 7).

One training process runs for the whole measurement and logs the end time of every step.
Meanwhile this controller cycles through short phases — untraced, `gpuwhy trace`,
`gpuwhy trace --stack`, `gpuwhy trace --launch-duty 1` (gpuwhy_exact: every launch counted),
`--profile-hz 0` (gpuwhy_noprofile: the on-CPU profile off), `--profile-hz 999`
(gpuwhy_profile999: the profile at 20x its default rate),
and the bare mechanism (empty uprobe+uretprobe pairs on the same
functions) — in rotating order. Each phase's throughput comes from the steps that ended inside
it (after a settle period that counts from the agent's attach — its start line — so that the
first second after it, which counts launches at both layers until they are seen to nest, and
`--stack`'s slower start stay outside; an untraced phase after an untraced one needs no
settle; with the default launch duty cycle of 10 s, a measured part of 10 s holds exactly one
counting second), and each traced phase is compared with the untraced phases on either side
of it, so the loop's slow drift cancels out. A gpuwhy phase whose CUDA probes did not attach
ends the measurement. Two metrics per
phase: throughput (steps/s) and the main thread's CPU time per step (/proc/PID/schedstat, ns:
the thread that makes the CUDA calls, so the one that pays for the probes). Each phase
also records the host's steal time (/proc/stat: on a VM, CPU time the hypervisor gave
elsewhere), the GPU's SM clock, power and temperature (NVML, where pynvml is installed) and
how long the agent took to attach, so a noisy host or a throttled GPU shows in the data.
Each phase's throughput is the steps between its first and last step end over the time between
them (no fraction of a step counted at the edges). Each mode reports the mean loss over its
phases with a 95% confidence interval: Student's t over groups of traced phases that share the
same untraced neighbours (they share those neighbours' noise, so the groups, not the phases,
are the independent units; overhead_test.py checks the coverage in simulation). Many short
phases resolve what a few long ones cannot, because the loop's own drift is slow next to a
phase.

Probe accounting (--accounting): a phase's throughput cannot resolve a few tenths of a percent
on a loop whose own phase-to-phase noise is ±2%, so after the alternating phases each traced
mode gets one more phase with kernel.bpf_stats_enabled=1, and the run and time counters of
every BPF program the agent loaded (found as the programs that appeared after it started) are
read over the measured part. Per training step that gives the exact number of uprobe,
uretprobe and tracepoint hits and the BPF run time; with the trap cost of one uprobe and one
uretprobe on the same machine (`gw_uprobe_cost`'s bare entry and bare pair columns, --trap-ns)
the cost the probes add per step is bounded from above: every hit is charged to the training
process's critical path, tracepoint hits of other processes included. `--summarize DIR`
recomputes the summary from DIR/phases.jsonl (e.g. with the trap costs measured later);
`--summarize DIR1 DIR2 …` pools runs: each traced phase is still compared with the untraced
phases of its own run, and the interval is over all runs' groups together (written to --out
DIR when given). The interval assumes the runs' groups share one noise level: with
--max-untraced-spread PCT, a run whose untraced phases lie more than PCT% apart (a noisy host,
judged on untraced phases only, so the choice says nothing about the traced ones) is left out,
and named. Weighting runs by their own noise instead covers badly (pooling_sim.py).

Every phase is appended to DIR/phases.jsonl as it ends, and --deadline S stops starting phases
once one more would not end S seconds after the start, so a time limit still leaves a summary
(SIGTERM also ends the phases; the summary is then written with the signal ignored).

Usage (as root):
  python3 overhead.py --gpuwhy ./gpuwhy --bare ./gw_bare_probes --out DIR
                      [--phase 13] [--settle 3] [--rounds 8] [--deadline S]
                      [--modes untraced,gpuwhy,bare] [--train-arg=--data=gpu ...]
                      [--accounting [--bpftool PATH]] [--trap-ns ENTRY,RET]
  python3 overhead.py --summarize DIR [DIR…] [--max-untraced-spread PCT] [--trap-ns ENTRY,RET]
                      [--out DIR]
"""
import argparse
import atexit
import functools
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
    """(how many steps ended in [t0, t1), the first and the last of those end times)."""
    n, first, last = 0, None, None
    with open(log) as f:
        for line in f:
            if line.startswith("#"):
                continue
            t = int(line)
            if t0 <= t < t1:
                n += 1
                first = t if first is None else first
                last = t
    return n, first, last


def step_rate(n, first, last, t0, t1):
    """Steps a second: the steps between the first and the last step end inside the window
    over the time between them, so that the fraction of a step at either edge is not counted
    as a whole one (on a loop of 2 steps a second, that alone is ±5% in a 10 s phase)."""
    if n > 1 and last > first:
        return (n - 1) / ((last - first) / 1e9)
    return n / ((t1 - t0) / 1e9)


@functools.lru_cache(maxsize=None)
def nvml_device():
    """(pynvml, handle of GPU 0), initialized once; (None, None) without pynvml or a driver."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:  # pynvml raises its own errors, and ImportError where it is missing
        return None, None


class GpuSampler:
    """The GPU's SM clock (MHz), power (W) and temperature (C) sampled through NVML once a
    second during a phase: whether the GPU itself changed speed (a throttled clock) shows next
    to each phase's throughput. Records nothing where pynvml is missing."""

    def __init__(self):
        self.samples = []
        self.nvml, self.handle = nvml_device()

    def sample(self):
        if self.nvml is None:
            return
        n, h = self.nvml, self.handle
        try:
            self.samples.append((n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                                 n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                                 n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)))
        except n.NVMLError:
            pass

    def means(self):
        if not self.samples:
            return {}
        return {k: statistics.fmean(s[i] for s in self.samples)
                for i, k in enumerate(("gpu_sm_mhz", "gpu_power_w", "gpu_temp_c"))}


# What an agent prints once its probes are attached: `gpuwhy trace`'s start line, and
# gw_bare_probes' count of attached pairs.
READY_MARKS = ("gpuwhy trace: tracing", "pairs attached")


def wait_ready(proc, log_path, timeout=60):
    """Waits until the agent's log says its probes are attached. An agent that exits or does
    not attach within `timeout` seconds ends the measurement: a phase without probes would be
    measured as a traced one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path, errors="replace") as f:
            if any(mark in f.read() for mark in READY_MARKS):
                return
        if proc.poll() is not None:
            sys.exit(f"the agent exited before it attached (code {proc.returncode}); see {log_path}")
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"the agent did not attach within {timeout} s; see {log_path}")


def has_cuda_probes(log_path):
    """Whether a gpuwhy phase's CUDA probes went on (its "cuda: attached N probes" note,
    printed within a second of the start). A phase without them would measure a tracer that
    traces no CUDA call, and understate the loss."""
    with open(log_path, errors="replace") as f:
        return "cuda: attached" in f.read()


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


def t975(df):
    """The 97.5% quantile of Student's t with `df` degrees of freedom: the table up to 4, then
    the Cornish-Fisher expansion about the normal's 1.96 (within 1% of the table from 5 up,
    0.1% from 10)."""
    if df < 5:
        return (12.706, 4.303, 3.182, 2.776)[df - 1]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def mean_ci(groups):
    """Mean of all values in `groups` and its 95% interval, with the groups as the independent
    units: traced phases compared with the same untraced neighbours share their noise, so the
    interval is Student's t over the groups' means (k - 1 degrees of freedom). Counting each
    phase as independent (a bootstrap over phases, as before) gave intervals that held the
    true value only 90% of the time in a simulation of white phase noise in this order; this
    one 95%."""
    groups = [g for g in groups if g]
    values = [v for g in groups for v in g]
    mean = statistics.fmean(values)
    if len(groups) < 2:
        return mean, None, None  # one group: no spread to make an interval from
    means = [statistics.fmean(g) for g in groups]
    half = t975(len(groups) - 1) * statistics.stdev(means) / len(groups) ** 0.5
    return mean, mean - half, mean + half


def interval(lo_hi):
    lo, hi = lo_hi
    return "[no interval: one group]" if lo is None else f"[{lo:+.2f}, {hi:+.2f}]"


def neighbours(run, i):
    """The nearest untraced phases before and after phase i in its run (None where none)."""
    before = next((q for q in reversed(run[:i]) if q["mode"] == "untraced"), None)
    after = next((q for q in run[i + 1:] if q["mode"] == "untraced"), None)
    return before, after


def neighbour_ratio(run, i, key):
    """Phase i's `key` over the mean of its untraced neighbours' (neighbours()); None where the
    phase or both neighbours lack it."""
    refs = [q[key] for q in neighbours(run, i) if q and q.get(key, 0) > 0]
    if not refs or run[i].get(key, 0) <= 0:
        return None
    return run[i][key] / statistics.mean(refs)


def neighbour_groups(run, key):
    """Each traced phase's `key` relative to its untraced neighbours' (neighbour_ratio), by mode
    and then by those neighbours: {mode: {(t0 before, t0 after): [ratios]}}. Phases compared
    with the same neighbours share their noise, so a group is mean_ci's unit."""
    out = {}
    for i, ph in enumerate(run):
        if ph["mode"] == "untraced":
            continue
        r = neighbour_ratio(run, i, key)
        if r is not None:
            group = tuple(q and q["t0"] for q in neighbours(run, i))
            out.setdefault(ph["mode"], {}).setdefault(group, []).append(r)
    return out


def untraced_phases(phases):
    """The untraced phases that measured a throughput."""
    return [q for q in phases if q["mode"] == "untraced" and q["steps_per_s"] > 0]


def untraced_spread_pct(run):
    """How far apart a run's untraced phases lie: 100 × (fastest / slowest - 1); None with
    fewer than two."""
    rates = [q["steps_per_s"] for q in untraced_phases(run) if not q.get("accounting")]
    if len(rates) < 2:
        return None
    return 100 * (max(rates) / min(rates) - 1)


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
        # Not --quiet: the start line says when the probes are attached (a status line a
        # second follows, as when a user runs it with its output to a file).
        cmd = [args.gpuwhy, "trace", "--db", os.path.join(out, f"phase{idx}.db")]
        if mode == "gpuwhy_stack":
            cmd.append("--stack")
        if mode == "gpuwhy_exact":  # every launch counted (no launch duty cycle)
            cmd += ["--launch-duty", "1"]
        if mode == "gpuwhy_noprofile":  # the on-CPU profile off (the default mode without it)
            cmd += ["--profile-hz", "0"]
        if mode == "gpuwhy_profile999":  # the profile at 20x its default rate: its cost resolves
            cmd += ["--profile-hz", "999"]
    log = open(phase_log_path(out, idx, mode), "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def phase_log_path(out, idx, mode):
    return os.path.join(out, f"phase{idx}_{mode}.log")


BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"
# The agent's uprobe programs that run at a function's entry, and those at its return, as
# name prefixes (bpf_prog_info cuts names to 15 characters; bpftool prints BTF's full name). Every other program it loads is a tracepoint.
ENTRY_PROGS = ("gw_cuda_enter", "gw_cuda_count", "gw_cuda_launch")
RETURN_PROGS = ("gw_cuda_exit", "gw_cuda_name_ex", "gw_cuda_registe")


def bpf_progs(bpftool):
    """{id: (name, run_cnt, run_time_ns)} of every loaded BPF program (bpftool -j prog show)."""
    out = subprocess.run([bpftool, "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"]: (p.get("name", ""), p.get("run_cnt", 0), p.get("run_time_ns", 0))
            for p in json.loads(out)}


def prog_class(name):
    if name.startswith(ENTRY_PROGS):
        return "uprobe"
    if name.startswith(RETURN_PROGS):
        return "uretprobe"
    return "tracepoint"


def host_cpu_ticks():
    """(steal, total) jiffies of all CPUs from /proc/stat: steal is time the hypervisor ran
    something else while this VM wanted the CPU, the host noise a phase cannot see otherwise."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    steal = fields[7] if len(fields) > 7 else 0
    return steal, sum(fields[:8])


def run_phase(mode, args, train, rt, drv, steps_log, idx, accounting=False, settle=None):
    """One phase: start `mode`, settle, measure, stop. With `accounting`, BPF run counters of
    the programs the agent loaded are read over the measured part too."""
    before_ids = set(bpf_progs(args.bpftool)) if accounting else set()
    launched = time.monotonic()
    proc = start_mode(mode, args, train.pid, rt, drv, args.out, idx)
    # The settle period counts from the attach, not from the launch: `--stack` takes longer to
    # attach (symbol tables), and the first second after an attach counts launches at both
    # layers until they are seen to nest, a start-up cost a long trace pays once.
    if proc is not None:
        wait_ready(proc, phase_log_path(args.out, idx, mode))
    ready_s = time.monotonic() - launched
    settle = args.settle if settle is None else settle
    t0 = time.monotonic_ns() + int(settle * 1e9)
    time.sleep(settle)
    if mode.startswith("gpuwhy") and not has_cuda_probes(phase_log_path(args.out, idx, mode)):
        proc.kill()
        sys.exit("gpuwhy attached no CUDA probes (no 'cuda: attached' note); see "
                 + phase_log_path(args.out, idx, mode))
    cpu0, _ = agent_usage(proc.pid) if proc is not None else (None, None)
    stats0 = {k: v for k, v in bpf_progs(args.bpftool).items() if k not in before_ids} \
        if accounting else {}
    train_cpu0 = process_cpu_s(train.pid)
    steal0, total0 = host_cpu_ticks()
    gpu = GpuSampler()
    end = time.monotonic() + (args.phase - args.settle)
    while (left := end - time.monotonic()) > 0:
        gpu.sample()
        time.sleep(min(1.0, left))
    t1 = time.monotonic_ns()
    train_cpu1 = process_cpu_s(train.pid)
    steal1, total1 = host_cpu_ticks()
    stats1 = bpf_progs(args.bpftool) if accounting else {}
    cpu1, rss = agent_usage(proc.pid) if proc is not None else (None, None)
    agent = {}
    if cpu0 is not None and cpu1 is not None:
        agent = {"agent_cpu_pct": 100 * (cpu1 - cpu0) / ((t1 - t0) / 1e9),
                 "agent_peak_rss_mb": rss}
    if proc is not None:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    n, first, last = steps_between(steps_log, t0, t1)
    phase = {"mode": mode, "t0": t0, "t1": t1, "steps": n,
             "steps_per_s": step_rate(n, first, last, t0, t1),
             "train_cpu_ms_per_step": 1e3 * (train_cpu1 - train_cpu0) / n if n else 0,
             "host_steal_pct": 100 * (steal1 - steal0) / max(1, total1 - total0),
             "ready_s": ready_s, **gpu.means(), **agent}
    if accounting:
        progs = {}
        for pid_, (name, cnt0, ns0) in stats0.items():
            if pid_ in stats1:
                _, cnt1, ns1 = stats1[pid_]
                cls = progs.setdefault(name, {"class": prog_class(name), "hits": 0, "run_ns": 0})
                cls["hits"] += cnt1 - cnt0
                cls["run_ns"] += ns1 - ns0
        phase["accounting"] = True
        phase["progs"] = progs
    return phase


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpuwhy")
    p.add_argument("--bare")
    p.add_argument("--out")
    p.add_argument("--phase", type=float, default=13,
                   help="seconds per phase; the measured part (phase - settle) should be a "
                        "multiple of the launch duty cycle (10 s)")
    p.add_argument("--settle", type=float, default=3)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--modes", default="untraced,gpuwhy,bare")
    p.add_argument("--deadline", type=float, default=0,
                   help="seconds from start after which no phase may end (0: no limit)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--train-arg", action="append", default=[],
                   help="passed on to torch_train.py (e.g. --train-arg=--d-model=2048)")
    p.add_argument("--trainer", default=os.path.join(HERE, "torch_train.py"),
                   help="the training script (its --duration/--log/--workers interface)")
    p.add_argument("--accounting", action="store_true",
                   help="end with one phase per traced mode under kernel.bpf_stats_enabled")
    p.add_argument("--bpftool", default="bpftool")
    p.add_argument("--trap-ns", default="",
                   help="ENTRY,RET: ns one uprobe and one uretprobe cost beyond their program "
                        "(gw_uprobe_cost: bare entry, bare pair minus bare entry)")
    p.add_argument("--summarize", metavar="DIR", nargs="+",
                   help="only recompute the summary of earlier runs from DIR/phases.jsonl "
                        "(several: pooled)")
    p.add_argument("--max-untraced-spread", metavar="PCT", type=float, default=None,
                   help="with --summarize: leave out runs whose untraced phases lie more than "
                        "PCT%% apart (max/min - 1)")
    args = p.parse_args()
    if args.summarize:
        runs = []
        for d in args.summarize:
            with open(os.path.join(d, "phases.jsonl")) as f:
                run = [json.loads(line) for line in f if line.strip()]
            spread = untraced_spread_pct(run)
            if args.max_untraced_spread is not None and (
                    spread is None or spread > args.max_untraced_spread):
                print(f"left out {d}: untraced phases "
                      + ("missing" if spread is None else f"{spread:.1f}% apart")
                      + f" (limit {args.max_untraced_spread:g}%)", flush=True)
                continue
            runs.append(run)
        if not runs:
            sys.exit("no run left to summarize")
        out = args.out or (args.summarize[0] if len(runs) == 1 else None)
        if out:
            os.makedirs(out, exist_ok=True)
        summarize(runs, out, args.trap_ns)
        return
    if not (args.gpuwhy and args.bare and args.out):
        p.error("--gpuwhy, --bare and --out are needed (or --summarize DIR)")
    os.makedirs(args.out, exist_ok=True)
    modes = args.modes.split(",")
    traced_modes = [m for m in dict.fromkeys(modes) if m not in ("untraced", "bare")]
    steps_log = os.path.join(args.out, "steps.txt")
    # Each phase also waits for detach (1 s) and the tracer's exit; warm-up takes up to a minute.
    started = time.monotonic()
    total = args.rounds * len(modes) * (args.phase + 3) + 120
    if args.deadline > 0:
        total = min(total, args.deadline + 30)
    train = subprocess.Popen([sys.executable, args.trainer, "--duration",
                              str(total), "--log", steps_log, "--workers", str(args.workers)]
                             + args.train_arg)
    atexit.register(train.kill)  # a measurement that ends on an error leaves no training behind
    # Warm up: wait for steady steps (CUDA context, cuBLAS handles, workers).
    while not os.path.exists(steps_log) or steps_between(steps_log, 0, 1 << 62)[0] < 200:
        if train.poll() is not None:
            sys.exit("training exited early")
        time.sleep(1)
    rt, drv = mapped_cuda_libs(train.pid)
    print(f"training pid {train.pid}; libcudart {rt}; libcuda {drv}", flush=True)
    phases = []
    idx = 0
    # A time limit (SIGTERM) or Ctrl-C ends the phases early; the summary covers those done.
    signal.signal(signal.SIGTERM, on_sigterm)
    phase_log = open(os.path.join(args.out, "phases.jsonl"), "w", buffering=1)
    # What one phase past its measured part costs: the tracer's stop, the detach pause.
    tail_s = 4.0
    ready_s = 3.0  # the longest attach so far (a guess until the first traced phase)
    # The accounting phases come last and are kept time for.
    reserve = len(traced_modes) if args.accounting else 0
    stats_was = None
    try:
        for r in range(args.rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for mode in order:
                if args.deadline > 0 and (time.monotonic() - started + (1 + reserve)
                                          * (args.phase + tail_s + ready_s) > args.deadline):
                    raise StopIteration
                # An untraced phase right after another has no attach or detach to settle
                # from; its measured part is as long as every other phase's.
                quiet = mode == "untraced" and phases and phases[-1]["mode"] == "untraced"
                phases.append(run_phase(mode, args, train, rt, drv, steps_log, idx,
                                        settle=0 if quiet else None))
                ready_s = max(ready_s, phases[-1]["ready_s"])
                phase_log.write(json.dumps(phases[-1]) + "\n")
                print(f"phase {idx:3d} {mode:13s} {phases[-1]['steps_per_s']:8.2f} steps/s",
                      flush=True)
                idx += 1
                time.sleep(1)  # detach fully before the next phase starts its clock
    except StopIteration:
        pass
    except KeyboardInterrupt:
        reserve = 0
        print(f"phases ended after {len(phases)} phases", flush=True)
    try:
        if reserve:
            with open(BPF_STATS) as f:
                stats_was = f.read().strip()
            with open(BPF_STATS, "w") as f:
                f.write("1")
            for mode in traced_modes:
                phases.append(run_phase(mode, args, train, rt, drv, steps_log, idx, True))
                phase_log.write(json.dumps(phases[-1]) + "\n")
                print(f"phase {idx:3d} {mode:13s} accounting", flush=True)
                idx += 1
                time.sleep(1)
    except KeyboardInterrupt:
        print("accounting phases cut short", flush=True)
    except (OSError, subprocess.CalledProcessError, FileNotFoundError) as e:
        print(f"no probe accounting: {e}", flush=True)
    finally:
        if stats_was is not None:
            with open(BPF_STATS, "w") as f:
                f.write(stats_was)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the summary is written whatever comes now
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    train.send_signal(signal.SIGINT)
    try:
        train.wait(timeout=30)
    except subprocess.TimeoutExpired:
        train.kill()
    summarize([phases], args.out, args.trap_ns)


def summarize(runs, out, trap_ns):
    """Summary of one run's phases, or of several runs pooled (`runs`: a list of phase lists)."""
    ab = [q for phases in runs for q in phases if not q.get("accounting")]
    modes = list(dict.fromkeys(q["mode"] for q in ab))
    # Each non-untraced phase against the mean of the nearest untraced phase before and after
    # it in its own run, grouped by those neighbours (mean_ci's units).
    ratios = {m: {} for m in modes if m != "untraced"}
    cpu_ratios = {m: {} for m in modes if m != "untraced"}
    for n, phases in enumerate(runs):
        run = [q for q in phases if not q.get("accounting")]
        for key, into in (("steps_per_s", ratios), ("train_cpu_ms_per_step", cpu_ratios)):
            for mode, groups in neighbour_groups(run, key).items():
                for group, rs in groups.items():
                    into[mode][(n,) + group] = rs  # groups never span runs
    summary = {"runs": len(runs)}
    for m, groups in ratios.items():
        rs = [r for g in groups.values() for r in g]
        if rs:
            mean, lo, hi = mean_ci([[100 * (1 - r) for r in g] for g in groups.values()])
            summary[m] = {"phases": len(rs), "groups": len(groups), "median_ratio": statistics.median(rs),
                          "min": min(rs), "max": max(rs),
                          "median_loss_pct": 100 * (1 - statistics.median(rs)),
                          "mean_loss_pct": mean, "loss_ci95_pct": [lo, hi]}
            if cpu_ratios[m]:
                cmean, clo, chi = mean_ci([[100 * (r - 1) for r in g]
                                           for g in cpu_ratios[m].values()])
                summary[m]["train_cpu_per_step_increase_pct"] = cmean
                summary[m]["train_cpu_per_step_ci95_pct"] = [clo, chi]
            cpu = [q["agent_cpu_pct"] for q in ab if q["mode"] == m and "agent_cpu_pct" in q]
            rss = [q["agent_peak_rss_mb"] for q in ab if q["mode"] == m and "agent_peak_rss_mb" in q]
            if cpu:
                summary[m]["agent_cpu_pct_median"] = statistics.median(cpu)
                summary[m]["agent_cpu_pct_max"] = max(cpu)
                summary[m]["agent_peak_rss_mb_max"] = max(rss)
    untraced = [q["steps_per_s"] for q in untraced_phases(ab)]
    if untraced:
        summary["untraced_steps_per_s"] = {"median": statistics.median(untraced),
                                           "min": min(untraced), "max": max(untraced)}
    steal = [q["host_steal_pct"] for q in ab if "host_steal_pct" in q]
    if steal:
        summary["host_steal_pct"] = {"median": statistics.median(steal), "max": max(steal)}
    trap = [float(x) for x in trap_ns.split(",")] if trap_ns else None
    accounting = [(q, untraced_phases(phases))
                  for phases in runs for q in phases if q.get("accounting") and q["steps"]]
    for q, run_untraced in accounting:
        per_step = {c: {"hits": 0.0, "run_ns": 0.0} for c in ("uprobe", "uretprobe", "tracepoint")}
        for prog in q["progs"].values():
            per_step[prog["class"]]["hits"] += prog["hits"] / q["steps"]
            per_step[prog["class"]]["run_ns"] += prog["run_ns"] / q["steps"]
        acc = {"steps": q["steps"], "per_step": per_step,
               "bpf_run_us_per_step": sum(c["run_ns"] for c in per_step.values()) / 1e3}
        if trap and run_untraced:
            step_us = 1e6 / statistics.median(p["steps_per_s"] for p in run_untraced)
            cost_us = (acc["bpf_run_us_per_step"] + (per_step["uprobe"]["hits"] * trap[0]
                       + per_step["uretprobe"]["hits"] * trap[1]) / 1e3)
            acc.update({"trap_ns": trap, "untraced_step_us": step_us,
                        "cost_us_per_step_bound": cost_us,
                        "loss_bound_pct": 100 * cost_us / (step_us + cost_us)})
        summary.setdefault(q["mode"], {}).setdefault("accounting_runs", []).append(acc)
    if out:
        with open(os.path.join(out, "overhead.json"), "w") as f:
            json.dump({"phases": runs[0] if len(runs) == 1 else runs, "summary": summary}, f,
                      indent=1)
    print(json.dumps(summary, indent=1))
    if "host_steal_pct" in summary:
        print(f"host steal time (/proc/stat) per phase: median "
              f"{summary['host_steal_pct']['median']:.2f}%, max {summary['host_steal_pct']['max']:.2f}%")
    for m, v in summary.items():
        if not isinstance(v, dict):
            continue
        if "mean_loss_pct" in v:
            print(f"{m:13s} throughput loss {v['mean_loss_pct']:+.2f}% "
                  f"{interval(v['loss_ci95_pct'])} over {v['phases']} phases "
                  f"({v['groups']} groups); CPU/step "
                  f"{v.get('train_cpu_per_step_increase_pct', float('nan')):+.2f}% "
                  f"{interval(v.get('train_cpu_per_step_ci95_pct', [None, None]))}")
        for acc in v.get("accounting_runs", []):
            ps = acc["per_step"]
            line = (f"{m:13s} per step: {ps['uprobe']['hits']:.1f} uprobe + "
                    f"{ps['uretprobe']['hits']:.1f} uretprobe + {ps['tracepoint']['hits']:.1f} "
                    f"tracepoint hits, BPF {acc['bpf_run_us_per_step']:.1f} us")
            if "loss_bound_pct" in acc:
                line += (f"; cost <= {acc['cost_us_per_step_bound']:.1f} us of a "
                         f"{acc['untraced_step_us']:.0f} us step: loss <= "
                         f"{acc['loss_bound_pct']:.2f}%")
            print(line)


if __name__ == "__main__":
    main()
