"""How small can one SQLite row per event get? (issue 19, the row-format target of 32 B/event)

Writes the store bench's event mix (bench/event_mix.h: 45% sched_switch, 20% driver launches,
10% syncs, 10% async copies, 10% page faults, 5% block I/O; with --wakers, blocked switches also
carry waker_pid/waker_tid as real recordings do) into throwaway SQLite files in three layouts
and prints bytes per event on disk:

  current     event_rows as it is: 18 columns, WITHOUT ROWID on (session, ts, seq)
  slots       the same key, the optional arguments folded into 4 op-family slots (sched_switch:
              other_pid, runq_ns, kind|cpu packed, waker pair packed; other ops: addr, bytes,
              kind|cpu|ret packed, name_id), tid stored as tid - pid, op offset to fit a byte
  plain7      the store bench's plain-SQLite reference: a 7-column rowid table, no index
  chunked     several events per row: up to --chunk consecutive events in one blob, column by
              column (timestamp deltas, pid, tid - pid, op, duration, then each optional column
              behind a presence bitmap), every integer a zigzag varint; key (session, first ts)
              and the chunk's last ts, as a reader behind a virtual table would need them

A design probe, not a benchmark of gpuwhy's writer (that is gw_store_bench).
Usage: python3 bench/row_layouts.py [--events 300000] [--wakers]
"""
import argparse
import os
import random
import sqlite3
import tempfile


def mix(n, wakers, rng):
    ts, out = 0, []
    for _ in range(n):
        ts += 1000 + rng.randrange(2000)
        pid = 3821 + rng.randrange(6)
        e = dict(ts=ts, pid=pid, tid=pid + rng.randrange(4), dur=0, ret=None, bytes=None,
                 kind=None, cpu=None, other=None, runq=None, addr=None, name=None, wp=None,
                 wt=None)
        r = rng.randrange(100)
        if r < 45:
            e.update(op=200, dur=rng.randrange(2000000), kind=rng.randrange(3),
                     cpu=rng.randrange(16), other=4000 + rng.randrange(50))
            e["runq"] = e["dur"] // 3
            if wakers and e["kind"] > 0:
                e["wp"] = 3821 + rng.randrange(6)
                e["wt"] = e["wp"] + rng.randrange(4)
        elif r < 65:
            e.update(op=100, dur=3000 + rng.randrange(4000), ret=0, name=1 + rng.randrange(200),
                     addr=0x7f0000001000)
        elif r < 75:
            e.update(op=18, dur=rng.randrange(5000000), ret=0, addr=0)
        elif r < 85:
            e.update(op=11, dur=5000 + rng.randrange(50000), ret=0, bytes=1 << 20, kind=1, addr=0)
        elif r < 95:
            e.update(op=202, addr=0x7f0000000000 + rng.randrange(1 << 30))
        else:
            e.update(op=206, dur=100000 + rng.randrange(5000000), bytes=131072, kind=0,
                     addr=rng.randrange(100000000))
        out.append(e)
    return out


def size_per_row(ddl, rows):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.db")
        db = sqlite3.connect(p)
        db.execute("PRAGMA page_size=16384")  # as gpuwhy creates files
        db.executescript(ddl)
        db.executemany("INSERT INTO t VALUES(" + ",".join("?" * len(rows[0])) + ")", rows)
        db.commit()
        db.close()
        return os.path.getsize(p) / len(rows)


def packed_small(e):
    # bit 0 kind present, bit 1 cpu present, bit 2 ret present; kind 6 bits, cpu 14, ret above
    p = 0
    if e["kind"] is not None:
        p |= 1 | (e["kind"] << 3)
    if e["cpu"] is not None:
        p |= 2 | (e["cpu"] << 9)
    if e["ret"] is not None:
        p |= 4 | (e["ret"] << 23)
    return p or None


def varint(v, out):
    v = (v << 1) ^ (v >> 63) if v < 0 else v << 1  # zigzag
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


OPTIONAL = ("ret", "bytes", "kind", "cpu", "other", "runq", "addr", "name", "wp", "wt")


def chunk_blob(events):
    """One chunk, column by column; optional columns as a presence bitmap plus present values
    (addresses as deltas from the previous present one)."""
    out = bytearray()
    prev = events[0]["ts"]
    for e in events:
        varint(e["ts"] - prev, out)
        prev = e["ts"]
    for key in ("pid",):
        for e in events:
            varint(e[key], out)
    for e in events:
        varint(e["tid"] - e["pid"], out)
    for e in events:
        out.append(e["op"] & 0xFF)
    for e in events:
        varint(e["dur"], out)
    for key in OPTIONAL:
        present = [e[key] is not None for e in events]
        if not any(present):
            out.append(0)
            continue
        out.append(1)
        bits = 0
        for i, p_ in enumerate(present):
            bits |= p_ << i
        out += bits.to_bytes((len(events) + 7) // 8, "little")
        last = 0
        for e in events:
            if e[key] is not None:
                v = e[key]
                varint(v - last if key == "addr" else v, out)
                last = v if key == "addr" else last
    return bytes(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300000)
    ap.add_argument("--wakers", action="store_true")
    ap.add_argument("--chunk", type=int, default=128, help="events per row in the chunked layout")
    a = ap.parse_args()
    ev = mix(a.events, a.wakers, random.Random(1))
    current = [(1, e["ts"], 0, e["pid"], e["tid"], e["op"], e["dur"], e["ret"], e["bytes"],
                e["kind"], e["cpu"], e["other"], e["runq"], e["addr"], e["name"], None, e["wp"],
                e["wt"]) for e in ev]
    cols = "session,ts,seq,pid,tid,op,dur,ret,bytes,kind,cpu,other,runq,addr,name,stack,wp,wt"
    print(f"current  {size_per_row(f'CREATE TABLE t({cols}, PRIMARY KEY(session,ts,seq)) WITHOUT ROWID;', current):5.1f} B/event")
    slots = []
    for e in ev:
        if e["op"] == 200:
            a_, b_ = e["other"], e["runq"]
            d_ = None if e["wp"] is None else (e["wp"] << 22) | e["wt"]
        else:
            a_, b_, d_ = e["addr"], e["bytes"], e["name"]
        slots.append((1, e["ts"], 0, e["pid"], e["tid"] - e["pid"], e["op"] - 100, e["dur"], a_,
                      b_, packed_small(e), d_))
    print(f"slots    {size_per_row('CREATE TABLE t(session,ts,seq,pid,tid,op,dur,a,b,p,d, PRIMARY KEY(session,ts,seq)) WITHOUT ROWID;', slots):5.1f} B/event")
    plain = [(e["ts"], e["pid"], e["tid"], e["op"], e["dur"], e["addr"] or 0, e["bytes"] or 0)
             for e in ev]
    print(f"plain7   {size_per_row('CREATE TABLE t(ts,pid,tid,op,dur,addr,arg);', plain):5.1f} B/event")
    chunks = [ev[i:i + a.chunk] for i in range(0, len(ev), a.chunk)]
    rows = [(1, c[0]["ts"], c[-1]["ts"], len(c), chunk_blob(c)) for c in chunks]
    per_chunk = size_per_row("CREATE TABLE t(session,ts,last_ts,n,blob, PRIMARY KEY(session,ts)) "
                             "WITHOUT ROWID;", rows)
    print(f"chunked  {per_chunk / (len(ev) / len(chunks)):5.1f} B/event ({a.chunk} events a row)")


if __name__ == "__main__":
    main()
