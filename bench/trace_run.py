"""Shared by the capture, footprint and end-to-end benchmarks: run `gpuwhy trace` next to a
load, read what it recorded, and summarise repeated measurements.

TraceRun starts `gpuwhy trace --cuda-lib SIM_LIB --db DB` (no --duration: it is stopped with
SIGINT, the same clean stop as Ctrl-C), waits for its "tracing …" line (printed once every
source is attached), and after stop() reads the session row (events, drops, drops_detail) and
the rows of one process by op from the database.
"""

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import threading
import time


def median_range(values):
    """'median (min–max)' of a list of numbers."""
    return statistics.median(values), min(values), max(values)


def proc_cpu_seconds(pid):
    """utime + stime of a process from /proc/PID/stat, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # fields 14 and 15 of stat(5)


def thread_cpu_seconds(pid):
    """{(tid, comm): utime + stime seconds} for every thread of a process."""
    out = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = tail.split()
        out[(int(tid), head.split("(", 1)[1])] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def proc_status_kb(pid, key):
    """A kB field of /proc/PID/status (VmHWM, VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def parse_report(line, prefix):
    """'prefix: a=1 b=2.5' → {'a': 1.0, 'b': 2.5}."""
    out = {}
    for part in line[len(prefix) + 1:].split():
        k, _, v = part.partition("=")
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


def run_report(cmd, prefix):
    """Runs a load program and parses its one report line."""
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    for line in res.stdout.splitlines():
        if line.startswith(prefix + ":"):
            return parse_report(line, prefix)
    raise RuntimeError(f"no '{prefix}:' line from {cmd}: {res.stdout!r} {res.stderr!r}")


class TraceRun:
    def __init__(self, gpuwhy, sim_lib, db, extra=()):
        self.gpuwhy = gpuwhy
        self.db = db
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.unlink(db + suffix)
        self.proc = subprocess.Popen(
            [gpuwhy, "trace", "--cuda-lib", sim_lib, "--db", db, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.pid = self.proc.pid
        self.output = []
        ready = threading.Event()

        def pump():  # keep the pipe drained; the status line comes once a second
            for line in self.proc.stdout:
                self.output.append(line)
                if "tracing" in line:
                    ready.set()
            ready.set()

        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        if not ready.wait(60) or self.proc.poll() is not None:
            if self.proc.poll() is None:  # never leave a tracer behind (it holds probes)
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            raise RuntimeError("gpuwhy trace did not start: " + "".join(self.output))
        time.sleep(0.5)  # the drain thread's first polls

    def stop(self):
        """SIGINT, wait; returns seconds from the signal to exit (flush of any backlog)."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=300)
        self.pump.join(timeout=10)
        self.stop_s = time.monotonic() - t0
        if self.proc.returncode != 0:
            raise RuntimeError("gpuwhy trace failed: " + "".join(self.output[-20:]))
        return self.stop_s

    def session(self):
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        sid, events, drops, detail = con.execute(
            "SELECT id, events, drops, drops_detail FROM sessions ORDER BY id DESC LIMIT 1"
        ).fetchone()
        con.close()
        return {"id": sid, "events": events, "drops": drops,
                "drops_detail": json.loads(detail or "{}")}

    def rows_by_op(self, pid):
        """{op name: rows} of one process in the newest session. Through `gpuwhy query`: the
        events are in chunks that only gpuwhy's SQLite module reads (docs/schema.md)."""
        out = subprocess.run(
            [self.gpuwhy, "query", "--db", self.db, "--json",
             "SELECT op, COUNT(*) AS n FROM events WHERE pid = %d GROUP BY op" % int(pid)],
            capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise RuntimeError("gpuwhy query failed: " + out.stderr.strip())
        return {r["op"]: r["n"] for r in json.loads(out.stdout)}

    def cleanup(self):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.db + suffix):
                os.unlink(self.db + suffix)
