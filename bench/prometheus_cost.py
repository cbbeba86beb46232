#!/usr/bin/env python3
"""trace --prometheus (issue 18): what serving /metrics costs the agent on a busy trace.

Each repeat runs two fresh `gpuwhy trace`s next to the same load — gw_call_load at --rate
cudaStreamSynchronize calls/s (2 events per call) for --load-s seconds — one plain, one with
`--prometheus 127.0.0.1:PORT` scraped once a second by this script (as Prometheus would, one
connection per scrape). Agent CPU = utime+stime from /proc/PID/stat between 2 s after the load
starts and 1 s before it ends; with --prometheus also the CPU of its two threads
(gw-prom-http: the scrapes; gw-prom-explain: the analysis every 15 s), the scrape latency
(request → last byte), the page size and the analysis's own duration gauge.

Usage: sudo python3 bench/prometheus_cost.py [--build build] [--repeats 2]
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_run import (TraceRun, median_range, proc_cpu_seconds, proc_status_kb,  # noqa: E402
                       thread_cpu_seconds)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def load_cmd(a):
    return [f"{a.build}/bench/gw_call_load", "--lib", f"{a.build}/sim/lib", "--rate", str(a.rate),
            "--seconds", str(a.load_s), "--threads", "1"]


def prom_threads(pid):
    out = {"gw-prom-http": 0.0, "gw-prom-explain": 0.0}
    for (_, comm), s in thread_cpu_seconds(pid).items():
        if comm in out:
            out[comm] += s
    return out


def one(a, variant):
    """variant None: plain trace; else extra arguments next to --prometheus."""
    prometheus = variant is not None
    port = free_port()
    extra = ["--prometheus", f"127.0.0.1:{port}", *variant] if prometheus else []
    run = TraceRun(f"{a.build}/gpuwhy", f"{a.build}/sim/lib",
                   os.path.join(a.out, "prometheus_cost.db"), extra)
    stop = threading.Event()
    scrapes, sizes = [], []
    page = [""]

    def scrape():
        while not stop.wait(1.0):
            t0 = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                body = r.read()
            scrapes.append(time.monotonic() - t0)
            sizes.append(len(body))
            page[0] = body.decode()

    scraper = threading.Thread(target=scrape, daemon=True) if prometheus else None
    if scraper:
        scraper.start()
    load = subprocess.Popen(load_cmd(a), stdout=subprocess.PIPE, text=True)
    time.sleep(2)
    c1, t1, th1 = proc_cpu_seconds(run.pid), time.monotonic(), prom_threads(run.pid)
    time.sleep(a.load_s - 3)
    c2, t2, th2 = proc_cpu_seconds(run.pid), time.monotonic(), prom_threads(run.pid)
    load.communicate(timeout=60)
    hwm_mb = proc_status_kb(run.pid, "VmHWM") / 1024
    stop.set()
    if scraper:
        scraper.join()
    run.stop()
    events = run.session()["events"]
    run.cleanup()
    span = t2 - t1
    x = {"core": (c2 - c1) / span, "events": events, "hwm_mb": hwm_mb}
    if prometheus:
        x["http_core"] = (th2["gw-prom-http"] - th1["gw-prom-http"]) / span
        x["explain_core"] = (th2["gw-prom-explain"] - th1["gw-prom-explain"]) / span
        x["scrape_ms"] = 1000 * statistics.median(scrapes)
        x["scrapes"] = len(scrapes)
        x["page_kb"] = statistics.median(sizes) / 1024
        m = re.search(r"^gpuwhy_analysis_duration_seconds (\S+)$", page[0], re.M)
        x["analysis_s"] = float(m.group(1)) if m else float("nan")
        m = re.search(r"^gpuwhy_analysis_runs_total (\S+)$", page[0], re.M)
        x["analysis_runs"] = int(float(m.group(1))) if m else 0
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--rate", type=int, default=25000, help="calls/s (2 events per call)")
    p.add_argument("--load-s", type=float, default=34)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--variants", default="",
                   help="'|'-separated extra arguments next to --prometheus, each measured in "
                        "every repeat, e.g. '|--prometheus-analysis 10s' (default: one, none)")
    p.add_argument("--out", default="/var/tmp/gpuwhy-bench")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("prometheus_cost: needs root (BPF)")
    os.makedirs(a.out, exist_ok=True)
    variants = [v.split() for v in a.variants.split("|")]
    print(f"prometheus_cost: {os.uname().release}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, load {a.rate:,} calls/s "
          f"({2 * a.rate:,} events/s) for {a.load_s:g} s, scrape every 1 s")
    plain, prom = [], [[] for _ in variants]
    for r in range(a.repeats):
        x = one(a, None)
        plain.append(x)
        print(f"repeat {r + 1}: plain trace: agent {100 * x['core']:.2f}% of a core, peak RSS "
              f"{x['hwm_mb']:.1f} MB")
        for runs, v in zip(prom, variants):
            y = one(a, v)
            runs.append(y)
            print(f"repeat {r + 1}: --prometheus {' '.join(v) or '(defaults)'}: agent "
                  f"{100 * y['core']:.2f}% (http thread {100 * y['http_core']:.2f}%, analysis "
                  f"thread {100 * y['explain_core']:.2f}%), peak RSS {y['hwm_mb']:.1f} MB; "
                  f"{y['scrapes']} scrapes, median {y['scrape_ms']:.2f} ms, page "
                  f"{y['page_kb']:.1f} KiB; analysis runs {y['analysis_runs']}, last took "
                  f"{y['analysis_s']:.2f} s")
            sys.stdout.flush()
    m = lambda xs, k, s=100: "%.2f (%.2f–%.2f)" % median_range([s * v[k] for v in xs])
    print(f"summary (median, min–max): plain agent {m(plain, 'core')}% of a core, peak RSS "
          f"{m(plain, 'hwm_mb', 1)} MB")
    for runs, v in zip(prom, variants):
        print(f"  --prometheus {' '.join(v) or '(defaults)'}: agent {m(runs, 'core')}%, http "
              f"thread {m(runs, 'http_core')}%, analysis thread {m(runs, 'explain_core')}%, "
              f"peak RSS {m(runs, 'hwm_mb', 1)} MB")


if __name__ == "__main__":
    main()
