"""What the NVML sampler of `gpuwhy trace` costs per sample on a real GPU host (issue 15).

Runs `gpuwhy trace --quiet --duration D` once per sampling interval given (default: off,
100ms, 20ms, 10ms), in rotating order for --rounds rounds, each into its own database, and
reads the agent's user+system CPU time from the kernel's rusage of the finished child
(os.wait4, microsecond resolution) and its peak RSS (ru_maxrss). The number of samples taken
comes from the database itself (`SELECT count(*) FROM gpu_samples`). Cost per sample =
(CPU with sampling − CPU with sampling off, same round) / samples.

Usage (root, on the GPU host):
  python3 bench/gpu/nvml_cost.py --gpuwhy build/gpuwhy --out DIR [--duration 15] [--rounds 2]
Writes DIR/nvml_cost.json and prints a Markdown table. Stdlib only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def run_trace(gpuwhy, db, interval, duration):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    cmd = [gpuwhy, "trace", "--quiet", "--duration", f"{duration:g}s", "--db", db,
           "--gpu-interval", interval]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace").strip()
    wall = time.monotonic() - t0
    q = subprocess.run([gpuwhy, "query", "--db", db, "--json",
                        "SELECT (SELECT count(*) FROM gpu_samples) AS n, "
                        "(SELECT count(*) FROM gpu_process_samples) AS np"],
                       capture_output=True, text=True, timeout=60)
    try:
        row = json.loads(q.stdout)[0]
    except (ValueError, IndexError):
        row = {"n": None, "np": None, "error": q.stderr.strip()[:300]}
    return {"interval": interval, "rc": p.returncode, "wall_s": round(wall, 2),
            "cpu_s": round(ru.ru_utime + ru.ru_stime, 4), "maxrss_mb": round(ru.ru_maxrss / 1024, 1),
            "samples": row.get("n"), "process_samples": row.get("np"),
            "stderr": err[-400:] if p.returncode else ""}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuwhy", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration", type=float, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--intervals", default="off,100ms,20ms,10ms")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    intervals = args.intervals.split(",")
    if "off" not in intervals:
        sys.exit("nvml_cost.py: --intervals must include off (the reference)")
    runs = []
    for r in range(args.rounds):
        order = intervals[r % len(intervals):] + intervals[:r % len(intervals)]
        for iv in order:
            res = run_trace(args.gpuwhy, os.path.join(args.out, f"nvml_{iv}.db"), iv,
                            args.duration)
            res["round"] = r
            runs.append(res)
            print(json.dumps(res), file=sys.stderr, flush=True)
    rows = []
    for iv in intervals:
        mine = [x for x in runs if x["interval"] == iv and x["rc"] == 0]
        per = []
        for x in mine:
            ref = [y for y in runs if y["interval"] == "off" and y["round"] == x["round"]
                   and y["rc"] == 0]
            if iv != "off" and ref and x["samples"]:
                per.append((x["cpu_s"] - ref[0]["cpu_s"]) / x["samples"] * 1e6)
        rows.append({
            "interval": iv, "runs": len(mine),
            "cpu_s_median": statistics.median([x["cpu_s"] for x in mine]) if mine else None,
            "core_share_pct": round(100 * statistics.median([x["cpu_s"] for x in mine]) /
                                    args.duration, 2) if mine else None,
            "samples_median": statistics.median([x["samples"] or 0 for x in mine]) if mine else None,
            "maxrss_mb": max([x["maxrss_mb"] for x in mine]) if mine else None,
            "us_per_sample": [round(v, 1) for v in per],
        })
    json.dump({"duration_s": args.duration, "runs": runs, "summary": rows},
              open(os.path.join(args.out, "nvml_cost.json"), "w"), indent=1)
    print("| sampling | runs | agent CPU (median) | share of a core | samples | µs CPU per sample"
          " (vs off, same round) | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['interval']} | {r['runs']} | {r['cpu_s_median']} s | {r['core_share_pct']}% |"
              f" {r['samples_median']} | {', '.join(map(str, r['us_per_sample'])) or '—'} |"
              f" {r['maxrss_mb']} MB |")


if __name__ == "__main__":
    main()
