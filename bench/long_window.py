"""Long-window explain (issue 19): wall time and peak RSS of `gpuwhy explain` over long windows,
answered from the rollup tier with raw rows for the incident, side by side in the same run with
the same window read from raw rows (`--raw`) and with the default 2 min window.

Databases (built first, in --dir):
  demo-1h   `gpuwhy demo cpu-contention --duration 3600s` (the synthetic contention scenario)
  rec-1h    gw_recorder_bench, 1 h at 400 steps/s: about 10 M rows
  rec-24h   gw_recorder_bench, 24 h at 20 steps/s under --max-db 256 MiB (a compressed-time
            always-on recorder: raw rows kept for the last hours, rollups for the whole day)
Each explain runs --rounds times, the variants interleaved; medians (and ranges) are printed.

Usage: python3 bench/long_window.py [--build build] [--dir /tmp/gw_long] [--rounds 3]
"""
import argparse
import os
import statistics
import subprocess
import sys


def timed(cmd):
    """Wall seconds and peak RSS (MB) of one command, from GNU time."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    wall, kb = out.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kb) / 1024


def tier(gpuwhy, db, args):
    import json
    out = subprocess.run([gpuwhy, "explain", "--db", db, "--json"] + args, capture_output=True,
                         text=True, check=True)
    d = json.loads(out.stdout)
    t = d["window_tier"]
    inc = t.get("incident")
    where = f" incident {inc['from_ns'] / 1e9:.0f}-{inc['to_ns'] / 1e9:.0f} s" if inc else ""
    top = d["findings"][0]["rule"] if d["findings"] else "none"
    return f"{t['answered_from']}{where}, top finding {top}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--dir", default="/tmp/gw_long")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    gpuwhy = os.path.join(a.build, "gpuwhy")
    rec = os.path.join(a.build, "bench", "gw_recorder_bench")
    os.makedirs(a.dir, exist_ok=True)
    dbs = {
        "demo-1h": os.path.join(a.dir, "demo-1h.db"),
        "rec-1h": os.path.join(a.dir, "rec-1h.db"),
        "rec-24h": os.path.join(a.dir, "rec-24h.db"),
    }
    for p in dbs.values():
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(p + suffix):
                os.unlink(p + suffix)
    print("building databases ...", file=sys.stderr)
    subprocess.run([gpuwhy, "demo", "cpu-contention", "--duration", "3600s", "--keep",
                    dbs["demo-1h"]], check=True, stdout=subprocess.DEVNULL)
    for name, args in (("rec-1h", ["--hours", "1", "--steps-per-s", "400",
                                   "--incident-at-h", "0.5"]),
                       ("rec-24h", ["--hours", "24", "--steps-per-s", "20",
                                    "--max-db", str(256 << 20)])):
        r = subprocess.run([rec, "--db", dbs[name]] + args, check=True, capture_output=True,
                           text=True)
        print(f"{name}: " + r.stdout.strip().replace("\n", "\n    "))
    variants = [
        ("demo-1h", "last 2 min (default)", []),
        ("demo-1h", "last 1 h", ["--since", "1h"]),
        ("demo-1h", "last 1 h, --raw", ["--since", "1h", "--raw"]),
        ("rec-1h", "last 2 min (default)", []),
        ("rec-1h", "last 1 h", ["--since", "1h"]),
        ("rec-1h", "last 1 h, --raw", ["--since", "1h", "--raw"]),
        ("rec-24h", "last 2 min (default)", []),
        ("rec-24h", "last 24 h", ["--since", "24h"]),
        ("rec-24h", "last 24 h, --raw", ["--since", "24h", "--raw"]),
    ]
    results = {i: [] for i in range(len(variants))}
    for r in range(a.rounds):
        for i, (db, _, args) in enumerate(variants):
            results[i].append(timed([gpuwhy, "explain", "--db", dbs[db]] + args))
        print(f"round {r + 1} done", file=sys.stderr)
    print(f"\n| database | window | wall s (median, range) | peak RSS MB | answered from |")
    print("|---|---|---|---|---|")
    for i, (db, label, args) in enumerate(variants):
        walls = [w for w, _ in results[i]]
        rss = max(m for _, m in results[i])
        print(f"| {db} | {label} | {statistics.median(walls):.2f} ({min(walls):.2f}-"
              f"{max(walls):.2f}) | {rss:.0f} | {tier(gpuwhy, dbs[db], args)} |")


if __name__ == "__main__":
    main()
