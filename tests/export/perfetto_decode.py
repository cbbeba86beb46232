#!/usr/bin/env python3
"""An independent reader of the Perfetto traces `gpuwhy export --format perfetto` writes.

Decodes the protobuf wire format by hand from Perfetto's published schema
(protos/perfetto/trace/trace_packet.proto, track_event/track_descriptor.proto,
track_event/track_event.proto, track_event/{process,thread,counter}_descriptor.proto,
track_event/debug_annotation.proto, clock_snapshot.proto) — it shares no code with gpuwhy —
checks the structure a trace processor relies on, and prints a JSON summary:

  tracks    uuid -> {kind, name, parent, pid, tid}
  per_track uuid -> {slices, instants, counters, counter_sum, first_ts, names{name: n},
                     slice_ns (summed slice durations), args{name: n}}
  problems  a list of structural errors (empty for a valid trace)

Usage: perfetto_decode.py TRACE > summary.json
"""
import json
import struct
import sys


def varint(buf, i):
    shift = 0
    value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf):
    """Yields (field number, wire type, value) of one message; LEN values as bytes."""
    i = 0
    n = len(buf)
    while i < n:
        key, i = varint(buf, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v = struct.unpack_from("<Q", buf, i)[0]
            i += 8
        elif wt == 2:
            ln, i = varint(buf, i)
            if i + ln > n:
                raise ValueError("length-delimited field past the end")
            v = bytes(buf[i:i + ln])
            i += ln
        elif wt == 5:
            v = struct.unpack_from("<I", buf, i)[0]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield field, wt, v


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_annotation(buf):
    name, value = None, None
    for f, wt, v in fields(buf):
        if f == 10:
            name = v.decode()
        elif f == 4:
            value = signed(v)
        elif f == 5:
            value = struct.unpack("<d", struct.pack("<Q", v))[0]
        elif f == 6:
            value = v.decode()
        elif f in (2, 3, 7):
            value = v
    return name, value


def main():
    data = open(sys.argv[1], "rb").read()
    tracks = {}
    per_track = {}
    problems = []
    open_slices = {}  # uuid -> stack of (begin ts, name)
    last_ts = 0
    packets = 0
    clock_snapshots = 0
    first_flags = None
    sequence_ids = set()

    def track_stats(uuid):
        return per_track.setdefault(uuid, {"slices": 0, "instants": 0, "counters": 0,
                                           "counter_sum": 0, "first_ts": None, "names": {},
                                           "slice_ns": 0, "ns_by_name": {}, "args": {}})

    for f, wt, packet in fields(data):
        if f != 1 or wt != 2:
            problems.append("top-level field %d is not Trace.packet" % f)
            continue
        packets += 1
        ts = None
        event = None
        descriptor = None
        for pf, pwt, pv in fields(packet):
            if pf == 8:
                ts = pv
            elif pf == 10:
                sequence_ids.add(pv)
            elif pf == 13 and packets == 1:
                first_flags = pv
            elif pf == 11:
                event = pv
            elif pf == 60:
                descriptor = pv
            elif pf == 6:
                clock_snapshots += 1
        if ts is not None:
            if ts < last_ts:
                problems.append("packet %d: timestamp %d before %d" % (packets, ts, last_ts))
            last_ts = max(last_ts, ts)
        if descriptor is not None:
            t = {"kind": "track", "name": None, "parent": None, "pid": None, "tid": None}
            uuid = None
            for df, dwt, dv in fields(descriptor):
                if df == 1:
                    uuid = dv
                elif df == 2:
                    t["name"] = dv.decode()
                elif df == 5:
                    t["parent"] = str(dv)
                elif df == 3:
                    t["kind"] = "process"
                    for xf, xwt, xv in fields(dv):
                        if xf == 1:
                            t["pid"] = signed(xv)
                        elif xf == 6:
                            t["name"] = xv.decode()
                elif df == 4:
                    t["kind"] = "thread"
                    for xf, xwt, xv in fields(dv):
                        if xf == 1:
                            t["pid"] = signed(xv)
                        elif xf == 2:
                            t["tid"] = signed(xv)
                        elif xf == 5:
                            t["name"] = xv.decode()
                elif df == 8:
                    t["kind"] = "counter"
            if uuid is None:
                problems.append("track descriptor without uuid")
                continue
            if str(uuid) in tracks:
                problems.append("track %d described twice" % uuid)
            t["order"] = len(tracks)
            tracks[str(uuid)] = t
            if t["parent"] is not None and t["parent"] not in tracks:
                problems.append("track %d: parent %s not described before it" % (uuid, t["parent"]))
        if event is not None:
            etype, uuid, name, counter, cats, args = None, None, None, None, [], {}
            for ef, ewt, ev in fields(event):
                if ef == 9:
                    etype = ev
                elif ef == 11:
                    uuid = ev
                elif ef == 23:
                    name = ev.decode()
                elif ef == 30:
                    counter = signed(ev)
                elif ef == 22:
                    cats.append(ev.decode())
                elif ef == 4:
                    k, v = decode_annotation(ev)
                    args[k] = v
            if ts is None:
                problems.append("track event without timestamp")
                continue
            key = str(uuid)
            if key not in tracks:
                problems.append("event on undescribed track %s" % key)
                continue
            st = track_stats(key)
            if st["first_ts"] is None:
                st["first_ts"] = ts
            if etype == 1:
                open_slices.setdefault(key, []).append((ts, name))
                st["slices"] += 1
                st["names"][name] = st["names"].get(name, 0) + 1
                for k in args:
                    st["args"][k] = st["args"].get(k, 0) + 1
                st.setdefault("arg_values", {})
                for k in ("rule", "events_dropped"):
                    if k in args:
                        st["arg_values"].setdefault(k, []).append(args[k])
            elif etype == 2:
                stack = open_slices.get(key)
                if not stack:
                    problems.append("slice end without begin on track %s at %d" % (key, ts))
                    continue
                begin, bname = stack.pop()
                if ts < begin:
                    problems.append("slice ends before it begins on track %s" % key)
                st["slice_ns"] += ts - begin
                st["ns_by_name"][bname] = st["ns_by_name"].get(bname, 0) + ts - begin
            elif etype == 3:
                st["instants"] += 1
                st["names"][name] = st["names"].get(name, 0) + 1
                st.setdefault("arg_values", {})
                for k in ("events_dropped", "rule"):
                    if k in args:
                        st["arg_values"].setdefault(k, []).append(args[k])
            elif etype == 4:
                if tracks[key]["kind"] != "counter":
                    problems.append("counter value on non-counter track %s" % key)
                st["counters"] += 1
                st["counter_sum"] += counter or 0
            else:
                problems.append("event type %s" % etype)
    for key, stack in open_slices.items():
        if stack:
            problems.append("%d slices never end on track %s" % (len(stack), key))
    if clock_snapshots == 0:
        problems.append("no clock snapshot")
    if first_flags != 1:
        problems.append("first packet does not clear incremental state")
    if sequence_ids != {1}:
        problems.append("sequence ids %s" % sorted(sequence_ids))
    json.dump({"packets": packets, "tracks": tracks, "per_track": per_track,
               "problems": problems}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
