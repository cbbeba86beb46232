#!/usr/bin/env python3
"""Runs the sim workloads the way a user (or a gpuwhy end-to-end test) does: each must run,
report its throughput line, stop cleanly on SIGTERM, and leave no worker process behind.

Usage: workload_test.py --bin-dir BUILD/sim/bin --lib-dir BUILD/sim/lib --py PATH/train_loop.py
"""
import argparse
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

REPORT = re.compile(r"^gw_train_loop: steps=(\d+) seconds=([\d.]+) steps_per_s=([\d.]+) "
                    r"samples_per_s=([\d.]+)$", re.M)
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def processes_named(comm):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() == comm:
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def wait_gone(comm, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not processes_named(comm):
            return True
        time.sleep(0.05)
    return False


def check_report(name, out, min_steps=1):
    m = REPORT.search(out)
    if not m:
        fail(f"{name}: no report line in output:\n{out}")
        return None
    steps = int(m.group(1))
    if steps < min_steps:
        fail(f"{name}: only {steps} steps")
    print(f"ok   {name}: {m.group(0)}")
    return steps


def run(name, cmd, env, comm, timeout=60, min_steps=1, expect_steps=None):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode}\nstdout:{p.stdout}\nstderr:{p.stderr}")
        return
    steps = check_report(name, p.stdout, min_steps)
    if expect_steps is not None and steps is not None and steps != expect_steps:
        fail(f"{name}: {steps} steps, expected {expect_steps}")
    if not wait_gone(comm):
        fail(f"{name}: workers named {comm} left behind: {processes_named(comm)}")


def run_sigterm(name, cmd, env, comm):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(processes_named(comm)) < 2:
        time.sleep(0.05)
    if len(processes_named(comm)) < 2:
        fail(f"{name}: workers named {comm} never appeared")
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail(f"{name}: did not exit within 10 s of SIGTERM")
        return
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode} after SIGTERM\nstderr:{err}")
    check_report(name + " (SIGTERM)", out, min_steps=0)  # a loaded machine may not get far
    if not wait_gone(comm):
        fail(f"{name}: workers named {comm} left behind after SIGTERM")


def run_sigkill(name, cmd, env, comm):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(processes_named(comm)) < 2:
        time.sleep(0.05)
    p.kill()
    p.wait()
    if wait_gone(comm):
        print(f"ok   {name}: workers exited after the trainer was killed")
    else:
        fail(f"{name}: orphaned workers {processes_named(comm)} after SIGKILL")
        for pid in processes_named(comm):
            os.kill(pid, signal.SIGKILL)


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def thread_comms(pid):
    """{tid: comm} of a process's threads."""
    comms = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return comms
    for tid in tids:
        comm = read_text(f"/proc/{pid}/task/{tid}/comm")
        if comm is not None:
            comms[int(tid)] = comm.strip()
    return comms


def children_of(ppid):
    """{pid: comm} of the live processes whose parent is ppid."""
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read_text(f"/proc/{entry}/stat")
        if stat is None:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == ppid and fields[0] != "Z":
            kids[int(entry)] = stat[stat.find("(") + 1:stat.rfind(")")]
    return kids


def exe_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def read_thread_calls(counts_dir, pid):
    """{(tid, comm): {api: count}} from gw_train_loop's per-thread ground truth."""
    calls = {}
    text = read_text(os.path.join(counts_dir, f"gw_train_loop.{pid}.threads")) or ""
    for line in text.splitlines():
        tid, comm, api, count = line.split()
        calls.setdefault((int(tid), comm), {})[api] = int(count)
    return calls


def read_counts(counts_dir, library, pid):
    counts = {}
    text = read_text(os.path.join(counts_dir, f"{library}.{pid}.counts")) or ""
    for line in text.splitlines():
        name, count = line.split()
        counts[name] = int(count)
    return counts


def run_pytorch_shape(name, cmd, env, comm, helper_comm, helpers, counts_dir):
    """--shape pytorch: the threads and processes of a PyTorch job, seen in /proc while it runs;
    SIGTERM stops it and leaves no child; the per-thread call counts match the libraries'."""
    p = subprocess.Popen(cmd, env=dict(env, GWSIM_CALL_COUNTS_DIR=counts_dir),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    want = {"pt_autograd_0", "pt_pin_memory"}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        kids = children_of(p.pid)
        workers = [k for k, c in kids.items() if c == comm]
        ready = (want <= set(thread_comms(p.pid).values()) and len(workers) == 2
                 and all(len(thread_comms(w)) >= 3 for w in workers)
                 and sum(c == helper_comm for c in kids.values()) == helpers)
        if ready:
            break
        time.sleep(0.05)
    threads = thread_comms(p.pid)
    kids = children_of(p.pid)
    workers = [k for k, c in kids.items() if c == comm]
    helper_pids = [k for k, c in kids.items() if c == helper_comm]
    missing = want - set(threads.values())
    if missing:
        fail(f"{name}: trainer threads {sorted(threads.values())} lack {sorted(missing)}")
    if threads.get(p.pid) != "gw_train_loop":
        fail(f"{name}: the main thread (tid == pid) is {threads.get(p.pid)!r}")
    if len(workers) != 2:
        fail(f"{name}: {len(workers)} workers named {comm} are children of the trainer: {kids}")
    for w in workers:
        n = len(thread_comms(w))
        if n < 3:
            fail(f"{name}: worker {w} has {n} threads, expected >= 3 (1 busy + 2 idle pool)")
        if exe_of(w) != exe_of(p.pid):
            fail(f"{name}: worker {w} runs {exe_of(w)}, not the trainer's binary (not forked?)")
    if len(helper_pids) != helpers:
        fail(f"{name}: {len(helper_pids)} helpers named {helper_comm}, expected {helpers}: {kids}")
    for h in helper_pids:
        if exe_of(h) == exe_of(p.pid) or read_text(f"/proc/{h}/cmdline") == read_text(
                f"/proc/{p.pid}/cmdline"):
            fail(f"{name}: helper {h} runs the trainer's program (not exec'd)")
    if not failures:
        print(f"ok   {name}: trainer threads {sorted(set(threads.values()))}, "
              f"{len(workers)} workers x >=3 threads, {len(helper_pids)} exec'd helpers "
              f"({os.path.basename(exe_of(helper_pids[0]) or '?') if helper_pids else '-'})")
    all_kids = set(kids)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail(f"{name}: did not exit within 10 s of SIGTERM")
        return
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode} after SIGTERM\nstderr:{err}")
    check_report(name + " (SIGTERM)", out, min_steps=1)
    left = [k for k in all_kids if os.path.exists(f"/proc/{k}")
            and (read_text(f"/proc/{k}/stat") or "Z").split(")")[-1].split()[0] != "Z"]
    if left:
        fail(f"{name}: children {left} left behind after SIGTERM")
    if not wait_gone(comm) or not wait_gone(helper_comm):
        fail(f"{name}: processes named {comm}/{helper_comm} left behind after SIGTERM")

    # Ground truth per thread: backward on the autograd thread, which makes the most calls.
    calls = read_thread_calls(counts_dir, p.pid)
    by_comm = {comm: apis for (tid, comm), apis in calls.items()}
    by_tid = {tid: apis for (tid, comm), apis in calls.items()}
    autograd = by_comm.get("pt_autograd_0", {})
    main = by_tid.get(p.pid, {})  # the process's initial thread
    pin = by_comm.get("pt_pin_memory", {})
    if not (autograd.get("cudaLaunchKernel", 0) > 0 and autograd.get("cudaMemsetAsync", 0) > 0):
        fail(f"{name}: the autograd thread made no backward launches/memsets: {calls}")
    if not (main.get("cudaMemcpyAsync", 0) > 0 and main.get("cudaDeviceSynchronize", 0) > 0
            and main.get("cudaLaunchKernel", 0) > 0):
        fail(f"{name}: the main thread lacks copies, launches or syncs: {main}")
    if pin.get("cudaHostAlloc", 0) == 0:
        fail(f"{name}: the pin-memory thread allocated no pinned memory: {pin}")
    totals = {comm: sum(apis.values()) for (tid, comm), apis in calls.items()}
    if totals and max(totals, key=totals.get) != "pt_autograd_0":
        fail(f"{name}: the autograd thread is not the busiest CUDA thread: {totals}")
    runtime = read_counts(counts_dir, "libcudart", p.pid)
    launches = sum(apis.get("cudaLaunchKernel", 0) for apis in calls.values())
    if launches != runtime.get("cudaLaunchKernel"):
        fail(f"{name}: per-thread launches {launches} != libcudart's "
             f"{runtime.get('cudaLaunchKernel')}")
    if not failures:
        print(f"ok   {name}: CUDA calls per thread {totals}, launches {launches} = libcudart's")


def run_steps_per_s(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    m = REPORT.search(p.stdout)
    if p.returncode != 0 or not m:
        fail(f"{cmd}: exit {p.returncode}\nstdout:{p.stdout}\nstderr:{p.stderr}")
        return None, None
    return int(m.group(1)), float(m.group(2))


def run_slow_worker(name, base, env):
    """One slow worker of two bounds the job: worker 0 makes every other batch, each costing at
    least batch-cpu-ms + slow-worker-ms of CPU, so steps <= 2 * (seconds / cost + prefetch) + 1.
    A healthy run has no such bound (the GPU's 8 ms per step allows 125 steps/s)."""
    healthy = run_steps_per_s(base, env)
    slow = run_steps_per_s(base + ["--slow-worker-ms", "100"], env)
    if healthy[0] is None or slow[0] is None:
        return
    h_sps, s_sps = healthy[0] / healthy[1], slow[0] / slow[1]
    bound = 2 * (slow[1] / 0.105 + 2) + 1
    if slow[0] > bound:
        fail(f"{name}: {slow[0]} steps in {slow[1]} s with a 100 ms worker, bound {bound:.0f}")
    if not s_sps < h_sps:
        fail(f"{name}: slow worker {s_sps:.1f} steps/s, not below healthy {h_sps:.1f}")
    gpu_bound = healthy[1] / 0.008 + 1
    if healthy[0] > gpu_bound:
        fail(f"{name}: healthy ran {healthy[0]} steps in {healthy[1]} s, over the GPU's "
             f"{gpu_bound:.0f}")
    print(f"ok   {name}: healthy {h_sps:.1f} steps/s, one 100 ms worker {s_sps:.1f} steps/s")


def run_main_thread_batches(name, base, env, comm):
    """--main-thread-batches forks no worker, and the main thread's batch CPU time bounds the
    job: a step is batch-cpu-ms of main-thread CPU, then 8 × 1 ms of kernels and a sync."""
    p = subprocess.Popen(base + ["--main-thread-batches", "--batch-cpu-ms", "20",
                                 "--duration", "2", "--worker-comm", comm],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    kids = children_of(p.pid)
    out, err = p.communicate(timeout=60)
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode}\nstderr:{err}")
        return
    if kids:
        fail(f"{name}: children {kids} (num_workers=0 forks none)")
    m = REPORT.search(out)
    if not m:
        fail(f"{name}: no report line in output:\n{out}")
        return
    steps, seconds = int(m.group(1)), float(m.group(2))
    bound = seconds / 0.028 + 1
    if steps > bound:
        fail(f"{name}: {steps} steps in {seconds} s, over the bound {bound:.0f}")
    print(f"ok   {name}: no children, {m.group(0)}")


# Offsets in gwsim/gpu_state.h: magic u64, version u32, device_count u32, pid i32, reserved u32,
# then dev[0] = {busy_ns, covered_until_ns, used_bytes, kernels}.
GPU_STATE = struct.Struct("=QIIiI4Q")
GPU_STATE_MAGIC = 0x5550474D49535747


def read_busy(state_dir, pid):
    """(busy_ns, kernels) of device 0 in a live process's gwsim-gpu.<pid>, or None."""
    try:
        with open(os.path.join(state_dir, f"gwsim-gpu.{pid}"), "rb") as f:
            data = f.read(GPU_STATE.size)
    except OSError:
        return None
    if len(data) < GPU_STATE.size:
        return None
    magic, _, _, fpid, _, busy, _, _, kernels = GPU_STATE.unpack(data)
    if magic != GPU_STATE_MAGIC or fpid != pid:
        return None
    return busy, kernels


def run_pair(py, env, kernels, kernel_ms, state_dir):
    """Two --neighbour processes of `kernels` kernels of `kernel_ms` each, started together.
    Returns ([loop seconds], [last busy ns seen], wall seconds) or None."""
    cmd = [sys.executable, py, "--neighbour", "--report", "--steps", str(kernels),
           "--duration", "0", "--neighbour-kernel-ms", str(kernel_ms)]
    env = dict(env, GWSIM_GPU_STATE_DIR=state_dir)
    t0 = time.monotonic()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    busy = [0, 0]
    while any(p.poll() is None for p in procs):
        for i, p in enumerate(procs):
            b = read_busy(state_dir, p.pid)
            if b is not None:
                busy[i] = max(busy[i], b[0])
        time.sleep(0.005)
    wall = time.monotonic() - t0
    seconds = []
    for p in procs:
        out, err = p.communicate()
        m = REPORT.search(out)
        if p.returncode != 0 or not m or int(m.group(1)) != kernels:
            fail(f"shared device: neighbour exit {p.returncode}\nstdout:{out}\nstderr:{err}")
            return None
        seconds.append(float(m.group(2)))
    return seconds, busy, wall


def run_shared_device(py, env, tmp):
    """GWSIM_SHARED_DEVICE=1 serializes kernels across processes: two processes of K kernels of
    D each take 2·K·D of device time together (their kernels never overlap), and each publishes
    only its own K·D as busy time (waiting for the other is not busy); without it each has a
    device of its own and takes about K·D."""
    k, d_ms = 20, 100
    kd = k * d_ms / 1000.0
    state_dir = os.path.join(tmp, "gpu-state")
    os.mkdir(state_dir)
    alone = run_pair(py, dict(env, GWSIM_SHARED_DEVICE="0"), k, d_ms, state_dir)
    shared = run_pair(py, dict(env, GWSIM_SHARED_DEVICE="1"), k, d_ms, state_dir)
    if alone is None or shared is None:
        return
    (a_secs, a_busy, a_wall), (s_secs, s_busy, s_wall) = alone, shared
    desc = (f"own devices: loops {a_secs[0]:.2f}/{a_secs[1]:.2f} s; shared: loops "
            f"{s_secs[0]:.2f}/{s_secs[1]:.2f} s, wall {s_wall:.2f} s, busy "
            f"{s_busy[0] / 1e9:.2f}/{s_busy[1] / 1e9:.2f} s (K·D = {kd:.1f} s)")
    if min(a_secs) < kd or max(a_secs) > 1.4 * kd:
        fail(f"shared device: without GWSIM_SHARED_DEVICE each should take about {kd} s: {desc}")
    # Exact: the two processes' 2·K·D of kernels never overlap.
    if s_wall < 2 * kd:
        fail(f"shared device: both finished within {s_wall:.2f} s < 2·K·D: {desc}")
    # The later starter shares the device for all its loop: about 2·K·D minus the start skew.
    if min(s_secs) < kd or max(s_secs) < 1.5 * kd:
        fail(f"shared device: loops not slowed by the other process: {desc}")
    # Busy time is each process's own kernels (the newest kernel may not be published yet).
    for busy in s_busy + a_busy:
        if not (kd - 2 * d_ms / 1000.0) * 1e9 <= busy <= kd * 1e9 * 1.001:
            fail(f"shared device: published busy {busy / 1e9:.3f} s, expected about {kd} s: "
                 f"{desc}")
    if os.listdir(state_dir) != ["gwsim-device0.lock"]:
        fail(f"shared device: {state_dir} holds {os.listdir(state_dir)}")
    print(f"ok   shared device: {desc}")


def odirect_supported(path):
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECT))
        return True
    except OSError:
        return False


def check_python_call_sites(path):
    """Each CUDA call in train_loop.py must be a direct call on a line of its own."""
    import ast
    with open(path) as f:
        tree = ast.parse(f.read())
    lines = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "rt"
                and node.func.attr.startswith("cuda")):
            if node.lineno != node.end_lineno:
                fail(f"train_loop.py:{node.lineno}: {node.func.attr} call spans lines")
            if node.lineno in lines:
                fail(f"train_loop.py:{node.lineno}: two CUDA calls on one line")
            lines[node.lineno] = node.func.attr
    if len(lines) < 10:
        fail(f"train_loop.py: only {len(lines)} CUDA call sites found")
    else:
        print(f"ok   train_loop.py: {len(lines)} CUDA call sites, one per line")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--py", required=True)
    a = ap.parse_args()
    env = dict(os.environ, GWSIM_LIB_DIR=a.lib_dir)
    train = os.path.join(a.bin_dir, "gw_train_loop")
    competitor = os.path.join(a.bin_dir, "gw_competitor")
    tag = str(os.getpid() % 100000)
    check_python_call_sites(a.py)

    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(a.bin_dir))) as tmp:
        data = os.path.join(tmp, "dataset.bin")
        with open(data, "wb") as f:
            f.write(os.urandom(8 << 20))
        io = ["--io-file", data] + (["--odirect"] if odirect_supported(data) else [])
        if "--odirect" not in io:
            print("note: O_DIRECT not supported here; the I/O scenario runs without it")

        for lang, base in (("cc", [train]), ("py", [sys.executable, a.py])):
            comm = f"gwt{lang}{tag}"
            common = base + ["--report", "--worker-comm", comm]
            run(f"{lang} default 2 s", common + ["--duration", "2"], env, comm)
            run(f"{lang} fixed steps", common + ["--steps", "20", "--duration", "0",
                                                 "--kernel-us", "200"], env, comm,
                expect_steps=20)
            run(f"{lang} pageable+io+faults+malloc", common + [
                "--duration", "2", "--pageable", "--workers", "3", "--batch-bytes", "1M",
                "--touch-mb", "4", "--malloc-per-step", "--sync-every", "2"] + io, env, comm)
            run(f"{lang} no workers", common + ["--duration", "1", "--workers", "0"], env, comm)
            run_sigterm(f"{lang} sigterm", common + ["--duration", "60"], env, comm)
            run_sigkill(f"{lang} sigkill", common + ["--duration", "60"], env, comm)

        # The Python job shapes for gpuwhy's end-to-end tests.
        comm = f"gwtpy{tag}"
        common = [sys.executable, a.py, "--report", "--worker-comm", comm]
        run("py gil thread", common + ["--duration", "1", "--gil-thread"], env, comm)
        run("py gil thread, late, bursts", common + [
            "--duration", "1", "--gil-thread", "--gil-thread-start", "0.5",
            "--gil-thread-duty", "0.5"], env, comm)
        run("py tiny kernels", common + ["--duration", "1", "--kernels-per-step", "2000",
                                         "--kernel-us", "5"], env, comm)
        run("py helper thread", common + ["--steps", "20", "--duration", "0",
                                          "--helper-thread", "--kernels-per-step", "9"],
            env, comm, expect_steps=20)
        run("py neighbour", [sys.executable, a.py, "--report", "--neighbour", "--steps", "12",
                             "--duration", "0", "--neighbour-kernel-ms", "5"], env, comm,
            expect_steps=12)
        run_main_thread_batches("py main-thread batches", [sys.executable, a.py, "--report"],
                                env, comm)
        run_shared_device(a.py, env, tmp)

        # --shape pytorch (C++ only): the same faults on a PyTorch job's threads and processes.
        comm = f"gwtpt{tag}"
        helper_comm = f"gwthelp{tag}"
        pt = [train, "--report", "--shape", "pytorch", "--worker-comm", comm,
              "--helper-comm", helper_comm]
        run("pt default 2 s", pt + ["--duration", "2"], env, comm)
        run("pt fixed steps", pt + ["--steps", "20", "--duration", "0", "--kernel-us", "200"],
            env, comm, expect_steps=20)
        run("pt pageable+io+faults+malloc", pt + [
            "--duration", "2", "--pageable", "--workers", "3", "--batch-bytes", "1M",
            "--touch-mb", "4", "--malloc-per-step", "--sync-every", "2"] + io, env, comm)
        run("pt pinned+io+faults+malloc", pt + [
            "--duration", "2", "--workers", "3", "--batch-bytes", "1M", "--touch-mb", "4",
            "--malloc-per-step", "--sync-every", "0"] + io, env, comm)
        run("pt no workers", pt + ["--duration", "1", "--workers", "0"], env, comm)
        counts_dir = os.path.join(tmp, "counts")
        os.mkdir(counts_dir)
        run_pytorch_shape("pt structure", pt + ["--duration", "60", "--exec-helpers", "2"], env,
                          comm, helper_comm, 2, counts_dir)
        run_slow_worker("pt slow worker", pt + ["--duration", "3", "--batch-cpu-ms", "2"], env)
        run_sigkill("pt sigkill", pt + ["--duration", "60", "--exec-helpers", "1"], env, comm)
        if not wait_gone(helper_comm):
            fail(f"pt sigkill: orphaned helpers {processes_named(helper_comm)}")
            for pid in processes_named(helper_comm):
                os.kill(pid, signal.SIGKILL)

        comm = f"gwtburn{tag}"
        t0 = time.monotonic()
        # Stops by itself after --duration. The bound is loose: on a loaded machine (a parallel
        # sanitizer build) a busy loop pinned to CPU 0 can wait seconds for that CPU.
        p = subprocess.run([competitor, "--duration", "0.5", "--cpu", "0", "--comm", comm],
                           capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
        if p.returncode != 0 or "gw_competitor: iterations=" not in p.stdout or took > 20:
            fail(f"competitor: rc={p.returncode} took={took:.1f}s out={p.stdout} err={p.stderr}")
        else:
            print(f"ok   competitor: {p.stdout.strip()} in {took:.2f} s")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all workload checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
