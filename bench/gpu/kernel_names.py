"""How many kernel launches gpuwhy names on a real PyTorch job, attached late and early.

Late: an eager training loop and a torch.compile'd one (Triton kernels) run first; once both
have run at least --warmup seconds and logged steps, `gpuwhy trace` attaches for --trace
seconds. Early: `gpuwhy trace -- python3 torch_train.py` starts the eager job under the tracer.
For each traced job it reports launches named vs left as fn@0x… (op_stats_seconds: every
launch, counted in BPF), per launch op, and the most launched kernels.

Usage: sudo python3 bench/gpu/kernel_names.py --gpuwhy build/gpuwhy --out /tmp/names
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH_OPS = "('cudaLaunchKernel','cudaLaunchKernelExC','cuLaunchKernel','cuLaunchKernelEx')"


def query(gpuwhy, db, sql):
    out = subprocess.run([gpuwhy, "query", "--db", db, "--json", "--limit", "0", sql],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def coverage(gpuwhy, db, pid):
    rows = query(gpuwhy, db,
                 f"SELECT op, SUM(CASE WHEN name LIKE 'fn@%' THEN count ELSE 0 END) AS unnamed, "
                 f"SUM(count) AS total FROM op_stats_seconds WHERE pid = {pid} AND op IN "
                 f"{LAUNCH_OPS} GROUP BY op ORDER BY total DESC")
    top = query(gpuwhy, db,
                f"SELECT name, SUM(count) AS n FROM op_stats_seconds WHERE pid = {pid} AND op IN "
                f"{LAUNCH_OPS} GROUP BY name ORDER BY n DESC LIMIT 8")
    triton = query(gpuwhy, db,
                   f"SELECT COUNT(DISTINCT name) AS kernels, COALESCE(SUM(count), 0) AS n FROM "
                   f"op_stats_seconds WHERE pid = {pid} AND op IN {LAUNCH_OPS} AND "
                   f"name LIKE 'triton%'")[0]
    total = sum(r["total"] for r in rows)
    unnamed = sum(r["unnamed"] for r in rows)
    return {"pid": pid, "launches": total, "unnamed": unnamed,
            "named_pct": round(100.0 * (total - unnamed) / total, 2) if total else None,
            "by_op": rows, "top": top, "triton": triton}


def steps(log):
    try:
        with open(log) as f:
            return sum(1 for line in f if not line.startswith("#"))
    except OSError:
        return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpuwhy", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--warmup", type=float, default=35)
    p.add_argument("--trace", type=float, default=10)
    p.add_argument("--max-wait", type=float, default=150)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    train = os.path.join(HERE, "torch_train.py")
    result = {}

    # ---- late attach: two jobs already running ----
    life = a.max_wait + a.trace + 20
    jobs = {}
    for kind, extra in (("eager", []), ("compiled", ["--compile"])):
        log = os.path.join(a.out, f"{kind}.steps")
        err = open(os.path.join(a.out, f"{kind}.log"), "w")
        jobs[kind] = (subprocess.Popen([a.python, train, "--duration", str(life), "--log", log,
                                        "--workers", "2"] + extra, stdout=err, stderr=err),
                      log)
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.max_wait:
        ready = all(steps(log) >= 20 or proc.poll() is not None for proc, log in jobs.values())
        if ready and time.monotonic() - t0 >= a.warmup:
            break
        time.sleep(1)
    waited = time.monotonic() - t0
    late_db = os.path.join(a.out, "late.db")
    subprocess.run([a.gpuwhy, "trace", "--duration", f"{a.trace}s", "--db", late_db, "--quiet"],
                   check=True)
    result["late"] = {"attached_after_s": round(waited, 1)}
    for kind, (proc, log) in jobs.items():
        if proc.poll() is not None:
            result["late"][kind] = {"error": f"job exited {proc.returncode} before the attach",
                                    "steps": steps(log)}
        else:
            result["late"][kind] = coverage(a.gpuwhy, late_db, proc.pid)
            result["late"][kind]["steps_before_attach"] = steps(log)
        proc.terminate()
    for proc, _ in jobs.values():
        proc.wait()

    # ---- early attach: the eager job started under the tracer ----
    early_db = os.path.join(a.out, "early.db")
    subprocess.run([a.gpuwhy, "trace", "--duration", "20s", "--db", early_db, "--quiet", "--",
                    a.python, train, "--duration", "12", "--log",
                    os.path.join(a.out, "early.steps"), "--workers", "2"], check=True)
    pid = query(a.gpuwhy, early_db,
                f"SELECT pid FROM op_stats_seconds WHERE op IN {LAUNCH_OPS} GROUP BY pid "
                "ORDER BY SUM(count) DESC LIMIT 1")[0]["pid"]
    result["early"] = {"eager": coverage(a.gpuwhy, early_db, pid)}

    with open(os.path.join(a.out, "kernel_names.json"), "w") as f:
        json.dump(result, f, indent=1)
    for when, jobs_result in result.items():
        for kind, r in jobs_result.items():
            if not isinstance(r, dict):
                continue
            if "error" in r:
                print(f"{when:5} {kind:8} {r['error']}")
                continue
            print(f"{when:5} {kind:8} launches {r['launches']:>9,}  named {r['named_pct']}%  "
                  f"triton kernels {r['triton']['kernels']} ({r['triton']['n']:,} launches)")


if __name__ == "__main__":
    main()
