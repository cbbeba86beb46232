#!/usr/bin/env python3
"""Runs the sim workloads the way a user (or a gpuwhy end-to-end test) does: each must run,
report its throughput line, stop cleanly on SIGTERM, and leave no worker process behind.

Usage: workload_test.py --bin-dir BUILD/sim/bin --lib-dir BUILD/sim/lib --py PATH/train_loop.py
"""
import argparse
import os
import re
import signal
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
