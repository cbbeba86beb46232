"""gpuwhy's launch counts on real PyTorch against independent counts, and CUDA Graph re-capture.

Three jobs of bench/gpu/torch_train.py (--data gpu: one thread launching, nothing else):

  eager      attached late. Two traces in a row: --launch-duty 1 (every launch counted), then
             the default duty cycle (an estimate with an error bar). Each runs beside
             gw_bare_probes --count on the same process: a bare uprobe tally of the launch
             calls of libcudart and libcuda over about the same seconds.
  graphs     torch.compile(mode="reduce-overhead"), started under `gpuwhy trace --launch-duty 1
             -- python3 …`, so every capture is seen whole; gw_bare_probes --count runs
             system-wide over the whole job (it is the only CUDA process then).
  recapture  reduce-overhead with a new sequence length every --new-shape-every steps (a new
             graph recorded each time), attached late with the defaults; explain --json.

Independent counts: the bare tally (calls) and torch.profiler inside the job (kernels the GPU
ran per step, graph nodes included, over 20 steps before the trace). Per-step figures divide
by the steps the job logged in the same seconds (session seconds map to CLOCK_MONOTONIC by
sessions.mono_start_ns). The re-capture job's measured loss comes from its own step log: the
new-shape steps' time beyond the seen-shape steps' mean.

Usage: sudo python3 bench/gpu/graph_counts.py --gpuwhy build-h200/gpuwhy \
           --bare build-h200/gw_bare_probes --out /tmp/graphs
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "torch_train.py")
RT_SYMS = "cudaLaunchKernel,cudaLaunchKernelExC,cudaGraphLaunch,cudaGraphLaunch_ptsz"
DRV_SYMS = ("cuLaunchKernel,cuLaunchKernel_ptsz,cuLaunchKernelEx,cuLaunchKernelEx_ptsz,"
            "cuGraphLaunch,cuGraphLaunch_ptsz,cuStreamBeginCapture_v2,cuStreamEndCapture,"
            "cuGraphInstantiateWithFlags")
KERNEL_OPS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
              "graph_kernels")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def query(a, db, sql):
    out = subprocess.run([a.gpuwhy, "query", "--db", db, "--json", "--limit", "0", sql],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip()}
    return json.loads(out.stdout)


def read_steps(path):
    steps = []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                parts = line.split()
                steps.append((int(parts[0]), len(parts) > 1 and parts[1] == "new"))
    except OSError:
        pass
    return steps


def steps_in(steps, a_ns, b_ns):
    return sum(1 for t, _ in steps if a_ns <= t < b_ns)


def libs_of(pid):
    rt = drv = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "libcudart.so" in path:
                rt = path
            elif "libcuda.so" in path:
                drv = path
    return rt, drv


class Bare:
    """gw_bare_probes --count in the background; monotonic ns of its attach and of its end."""

    def __init__(self, a, rt, drv, pid=None, duration=0):
        cmd = [a.bare, "--count"]
        if pid:
            cmd += ["--pid", str(pid)]
        cmd += ["--lib", rt, "--symbols", RT_SYMS, "--lib", drv, "--symbols", DRV_SYMS]
        if duration:
            cmd += ["--duration", str(duration)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.attached_ns = None
        self.stderr = []
        self.ready = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())
            if "attached" in line:
                self.attached_ns = time.monotonic_ns()
                self.ready.set()
        self.ready.set()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        out = self.proc.stdout.read()
        self.proc.wait()
        end = time.monotonic_ns()
        try:
            counts = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            counts = {"error": out, "stderr": self.stderr}
        return {"counts": counts, "from_ns": self.attached_ns, "to_ns": end,
                "stderr": self.stderr[-3:]}


def gpuwhy_counts(a, db, pid, steps):
    """Kernel runs per op over the seconds the launch probes covered whole, with the steps."""
    mono = query(a, db, "SELECT mono_start_ns FROM sessions ORDER BY id DESC LIMIT 1")
    mono0 = mono[0]["mono_start_ns"] if isinstance(mono, list) and mono else None
    cov = query(a, db, "SELECT sec, SUM(total_ns) AS ns FROM op_stats_seconds WHERE "
                       "op = 'launch_coverage' GROUP BY sec ORDER BY sec")
    full = [r["sec"] for r in cov if r["ns"] >= 999_000_000] if isinstance(cov, list) else []
    per_op = {}
    if full:
        rows = query(a, db, f"SELECT op, SUM(count) AS n FROM op_stats_seconds WHERE pid = {pid} "
                            f"AND sec IN ({','.join(map(str, full))}) GROUP BY op")
        per_op = {r["op"]: r["n"] for r in rows} if isinstance(rows, list) else rows
    n_steps = sum(steps_in(steps, mono0 + s * 10**9, mono0 + (s + 1) * 10**9) for s in full) \
        if mono0 is not None else 0
    kernels = sum(v for k, v in per_op.items() if k in KERNEL_OPS) if isinstance(per_op, dict) \
        else 0
    return {"full_seconds": len(full), "steps": n_steps, "per_op": per_op,
            "kernels": kernels,
            "kernels_per_step": round(kernels / n_steps, 3) if n_steps else None}


def explain_json(a, db, pid=None):
    cmd = [a.gpuwhy, "explain", "--db", db, "--json"]
    if pid:
        cmd += ["--pid", str(pid)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"error": out.stderr.strip(), "stdout": out.stdout[:2000]}


def explain_text(a, db, path):
    with open(path, "w") as f:
        subprocess.run([a.gpuwhy, "explain", "--db", db], stdout=f, stderr=subprocess.STDOUT)


def wait_steps(path, n, limit_s, proc):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if len(read_steps(path)) >= n or proc.poll() is not None:
            break
        time.sleep(1)
    return len(read_steps(path))


def bare_per_step(b, steps):
    n = steps_in(steps, b["from_ns"] or 0, b["to_ns"])
    c = b["counts"]
    if not isinstance(c, dict) or "error" in c:
        return {"steps": n, "counts": c}
    launches = sum(v for k, v in c.items() if k.split(":")[1].startswith(("cuLaunchKernel",)))
    graphs = sum(v for k, v in c.items() if k.split(":")[1].startswith("cuGraphLaunch"))
    return {"steps": n, "seconds": round((b["to_ns"] - (b["from_ns"] or 0)) / 1e9, 2),
            "counts": c, "driver_launches_per_step": round(launches / n, 3) if n else None,
            "graph_launches_per_step": round(graphs / n, 3) if n else None}


def eager(a, result):
    log("eager: start")
    steps_log = os.path.join(a.out, "eager.steps")
    prof = os.path.join(a.out, "eager.profile.json")
    err = open(os.path.join(a.out, "eager.log"), "w")
    job = subprocess.Popen([a.python, TRAIN, "--data", "gpu", "--duration", "120", "--log",
                            steps_log, "--profile-after", "100", "--profile-steps", "20",
                            "--profile-out", prof], stdout=err, stderr=err)
    n = wait_steps(steps_log, 600, 90, job)
    log(f"eager: {n} steps before the attach")
    rt, drv = libs_of(job.pid)
    out = {"pid": job.pid, "libcudart": rt, "libcuda": drv}
    for name, extra in (("duty1", ["--launch-duty", "1"]), ("default", [])):
        db = os.path.join(a.out, f"eager-{name}.db")
        bare = Bare(a, rt, drv, pid=job.pid)
        bare.ready.wait(20)
        subprocess.run([a.gpuwhy, "trace", "--pid", str(job.pid), "--duration", "20s", "--db",
                        db, "--quiet"] + extra, check=False)
        b = bare.stop()
        steps = read_steps(steps_log)
        ex = explain_json(a, db)
        explain_text(a, db, os.path.join(a.out, f"eager-{name}.explain.txt"))
        out[name] = {"gpuwhy": gpuwhy_counts(a, db, job.pid, steps),
                     "bare": bare_per_step(b, steps),
                     "explain_launches": find_launch_figures(ex)}
        log(f"eager {name}: {json.dumps(out[name]['gpuwhy'])[:300]}")
    job.terminate()
    job.wait()
    out["profiler"] = load(prof)
    result["eager"] = out
    return rt, drv


def find_launch_figures(ex):
    """The launch figures explain --json gives (whatever keys hold 'launch')."""
    found = {}

    def walk(v, path):
        if isinstance(v, dict):
            for k, x in v.items():
                if "launch" in k.lower() or "graph" in k.lower():
                    if not isinstance(x, (dict, list)):
                        found[path + k] = x
                walk(x, path + k + ".")
        elif isinstance(v, list):
            for i, x in enumerate(v[:12]):
                walk(x, path + str(i) + ".")
    walk(ex, "")
    return found


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": str(e)}


def graphs(a, result, rt, drv):
    log("graphs: start under trace --")
    steps_log = os.path.join(a.out, "graphs.steps")
    prof = os.path.join(a.out, "graphs.profile.json")
    db = os.path.join(a.out, "graphs.db")
    bare = Bare(a, rt, drv)
    bare.ready.wait(20)
    with open(os.path.join(a.out, "graphs.log"), "w") as err:
        subprocess.run([a.gpuwhy, "trace", "--launch-duty", "1", "--db", db, "--quiet", "--",
                        a.python, TRAIN, "--data", "gpu", "--compile-mode", "reduce-overhead",
                        "--duration", str(a.graph_s), "--log", steps_log, "--profile-after",
                        "400", "--profile-steps", "20", "--profile-out", prof],
                       stdout=err, stderr=err, check=False)
    b = bare.stop()
    steps = read_steps(steps_log)
    pid = query(a, db, "SELECT pid FROM op_stats_seconds WHERE op IN ('cudaGraphLaunch', "
                       "'graph_kernels', 'cudaLaunchKernel', 'cuLaunchKernel') GROUP BY pid "
                       "ORDER BY SUM(count) DESC LIMIT 1")
    pid = pid[0]["pid"] if isinstance(pid, list) and pid else 0
    totals = query(a, db, f"SELECT op, SUM(count) AS n, ROUND(SUM(total_ns) / 1e9, 3) AS s FROM "
                          f"op_stats_seconds WHERE pid = {pid} GROUP BY op ORDER BY n DESC")
    # Steady state: the seconds after the profiler's steps, when every graph is recorded.
    g = gpuwhy_counts(a, db, pid, steps)
    late = steady_counts(a, db, pid, steps, skip_steps=440)
    ex = explain_json(a, db)
    explain_text(a, db, os.path.join(a.out, "graphs.explain.txt"))
    result["graphs"] = {"pid": pid, "steps": len(steps), "totals": totals, "whole": g,
                        "steady": late, "bare_whole_job": b["counts"],
                        "profiler": load(prof), "explain_launches": find_launch_figures(ex),
                        "findings": [(x.get("rule"), x.get("severity"), x.get("lost_s"))
                                     for x in ex.get("findings", [])]
                        if isinstance(ex, dict) else ex}
    log(f"graphs: {json.dumps(result['graphs']['steady'])[:400]}")


def steady_counts(a, db, pid, steps, skip_steps):
    """Kernel runs per step over whole seconds after the job's first skip_steps steps."""
    if len(steps) <= skip_steps + 10:
        return {"error": f"only {len(steps)} steps"}
    mono = query(a, db, "SELECT mono_start_ns FROM sessions ORDER BY id DESC LIMIT 1")
    mono0 = mono[0]["mono_start_ns"]
    first = (steps[skip_steps][0] - mono0) // 10**9 + 1
    last = (steps[-1][0] - mono0) // 10**9 - 1
    if last <= first:
        return {"error": "no whole second after the skipped steps"}
    rows = query(a, db, f"SELECT op, SUM(count) AS n FROM op_stats_seconds WHERE pid = {pid} AND "
                        f"sec >= {first} AND sec < {last} GROUP BY op")
    per_op = {r["op"]: r["n"] for r in rows}
    n = steps_in(steps, mono0 + first * 10**9, mono0 + last * 10**9)
    kernels = sum(v for k, v in per_op.items() if k in KERNEL_OPS)
    names = query(a, db, f"SELECT name, SUM(count) AS n FROM op_stats_seconds WHERE pid = {pid} "
                         f"AND op = 'graph_kernels' AND sec >= {first} AND sec < {last} "
                         f"GROUP BY name ORDER BY n DESC LIMIT 6")
    return {"seconds": last - first, "steps": n, "per_op": per_op, "kernels": kernels,
            "kernels_per_step": round(kernels / n, 3) if n else None, "graphs": names}


def recapture(a, result, rt, drv):
    log("recapture: start")
    steps_log = os.path.join(a.out, "recapture.steps")
    err = open(os.path.join(a.out, "recapture.log"), "w")
    job = subprocess.Popen([a.python, TRAIN, "--data", "gpu", "--compile-mode",
                            "reduce-overhead", "--vary-seq", "400", "--new-shape-every",
                            str(a.new_shape_every), "--duration", "150", "--log", steps_log],
                           stdout=err, stderr=err)
    n = wait_steps(steps_log, a.recapture_warm_steps, 120, job)
    log(f"recapture: {n} steps before the attach")
    db = os.path.join(a.out, "recapture.db")
    subprocess.run([a.gpuwhy, "trace", "--pid", str(job.pid), "--duration",
                    f"{a.recapture_s}s", "--db", db, "--quiet"], check=False)
    job.terminate()
    job.wait()
    steps = read_steps(steps_log)
    mono = query(a, db, "SELECT mono_start_ns, wall_start_ns, wall_stop_ns FROM sessions "
                        "ORDER BY id DESC LIMIT 1")[0]
    t0 = mono["mono_start_ns"]
    t1 = t0 + (mono["wall_stop_ns"] - mono["wall_start_ns"])
    durs_new, durs_seen = [], []
    for (pt, _), (t, new) in zip(steps, steps[1:]):
        if t0 <= pt and t < t1:
            (durs_new if new else durs_seen).append(t - pt)
    mean_seen = sum(durs_seen) / len(durs_seen) if durs_seen else 0
    lost = sum(d - mean_seen for d in durs_new) / 1e9
    ops = query(a, db, f"SELECT op, SUM(count) AS n, ROUND(SUM(total_ns) / 1e9, 3) AS s FROM "
                       f"op_stats_seconds WHERE pid = {job.pid} AND op IN "
                       f"('cudaStreamBeginCapture', 'cudaStreamEndCapture', "
                       f"'cudaGraphInstantiate', 'cudaGraphLaunch', 'graph_node') GROUP BY op")
    ex = explain_json(a, db)
    explain_text(a, db, os.path.join(a.out, "recapture.explain.txt"))
    result["recapture"] = {
        "pid": job.pid, "window_s": round((t1 - t0) / 1e9, 2),
        "steps_new": len(durs_new), "steps_seen": len(durs_seen),
        "mean_seen_step_ms": round(mean_seen / 1e6, 3),
        "mean_new_step_ms": round(sum(durs_new) / len(durs_new) / 1e6, 3) if durs_new else None,
        "measured_lost_s": round(lost, 3), "graph_ops": ops,
        "findings": [(x.get("rule"), x.get("severity"), x.get("lost_s"))
                     for x in ex.get("findings", [])] if isinstance(ex, dict) else ex}
    log(f"recapture: {json.dumps(result['recapture'])[:600]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpuwhy", required=True)
    p.add_argument("--bare", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--graph-s", type=float, default=60)
    p.add_argument("--new-shape-every", type=int, default=10)
    p.add_argument("--recapture-warm-steps", type=int, default=150)
    p.add_argument("--recapture-s", type=float, default=30)
    p.add_argument("--only", default="eager,graphs,recapture")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    result = {}
    only = a.only.split(",")
    path = os.path.join(a.out, "graph_counts.json")
    rt = drv = None
    for name, fn in (("eager", eager), ("graphs", graphs), ("recapture", recapture)):
        if name not in only:
            continue
        try:
            if name == "eager":
                rt, drv = fn(a, result)
            else:
                if rt is None:
                    rt, drv = find_libs(a)
                fn(a, result, rt, drv)
        except Exception as e:  # keep what the other jobs measured
            result[name] = {"error": repr(e)}
            log(f"{name}: {e!r}")
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1)[:6000])


def find_libs(a):
    """The libraries a short CUDA job maps (when the eager job did not run)."""
    probe = subprocess.Popen([a.python, "-c", "import torch,time; torch.zeros(1, device='cuda');"
                                              "print('ok', flush=True); time.sleep(30)"],
                             stdout=subprocess.PIPE, text=True)
    probe.stdout.readline()
    libs = libs_of(probe.pid)
    probe.terminate()
    probe.wait()
    return libs


if __name__ == "__main__":
    main()
