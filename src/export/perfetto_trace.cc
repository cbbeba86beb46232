#include "export/perfetto_trace.h"

namespace gw::perfetto {

namespace {

ProtoMessage Packet() {
  ProtoMessage p;
  p.AddVarint(kPacketTrustedSequenceId, kSequenceId);
  return p;
}

std::string DescriptorPacket(const ProtoMessage& descriptor) {
  ProtoMessage p = Packet();
  p.AddMessage(kPacketTrackDescriptor, descriptor);
  return p.data();
}

}  // namespace

std::string ClockSnapshotPacket(uint64_t timestamp_ns, bool first_on_sequence) {
  // The trace's timestamps are wall-clock ns in the default (BOOTTIME) domain; the snapshot
  // declares REALTIME equal to it, so the UI can show the times as UTC.
  ProtoMessage snapshot;
  for (uint64_t clock : {kBuiltinClockBoottime, kBuiltinClockRealtime}) {
    ProtoMessage c;
    c.AddVarint(kClockId, clock);
    c.AddVarint(kClockTimestamp, timestamp_ns);
    snapshot.AddMessage(kClockSnapshotClocks, c);
  }
  ProtoMessage p = Packet();
  p.AddVarint(kPacketTimestamp, timestamp_ns);
  if (first_on_sequence) p.AddVarint(kPacketSequenceFlags, kSeqIncrementalStateCleared);
  p.AddMessage(kPacketClockSnapshot, snapshot);
  return p.data();
}

std::string ProcessTrackPacket(uint64_t uuid, int32_t pid, const std::string& name,
                               const std::string& cmdline) {
  ProtoMessage process;
  process.AddInt(kProcessPid, pid);
  if (!cmdline.empty()) process.AddString(kProcessCmdline, cmdline);
  process.AddString(kProcessName, name);
  ProtoMessage d;
  d.AddVarint(kTrackUuid, uuid);
  d.AddMessage(kTrackProcess, process);
  return DescriptorPacket(d);
}

std::string ThreadTrackPacket(uint64_t uuid, int32_t pid, int32_t tid, const std::string& name) {
  ProtoMessage thread;
  thread.AddInt(kThreadPid, pid);
  thread.AddInt(kThreadTid, tid);
  thread.AddString(kThreadName, name);
  ProtoMessage d;
  d.AddVarint(kTrackUuid, uuid);
  d.AddMessage(kTrackThread, thread);
  return DescriptorPacket(d);
}

std::string TrackPacket(uint64_t uuid, uint64_t parent_uuid, const std::string& name) {
  ProtoMessage d;
  d.AddVarint(kTrackUuid, uuid);
  if (parent_uuid != 0) d.AddVarint(kTrackParentUuid, parent_uuid);
  d.AddString(kTrackName, name);
  return DescriptorPacket(d);
}

std::string CounterTrackPacket(uint64_t uuid, uint64_t parent_uuid, const std::string& name) {
  ProtoMessage counter;
  counter.AddVarint(kCounterUnit, kCounterUnitCount);
  ProtoMessage d;
  d.AddVarint(kTrackUuid, uuid);
  if (parent_uuid != 0) d.AddVarint(kTrackParentUuid, parent_uuid);
  d.AddString(kTrackName, name);
  d.AddMessage(kTrackCounter, counter);
  return DescriptorPacket(d);
}

std::string EventPacket(uint64_t timestamp_ns, EventType type, uint64_t track_uuid,
                        const std::string& name, const char* category,
                        const std::vector<Arg>& args) {
  ProtoMessage e;
  e.AddVarint(kEventType, static_cast<uint64_t>(type));
  e.AddVarint(kEventTrackUuid, track_uuid);
  if (category != nullptr) e.AddString(kEventCategories, category);
  e.AddString(kEventName, name);
  for (const Arg& a : args) {
    ProtoMessage d;
    d.AddString(kAnnotationName, a.name);
    switch (a.kind) {
      case Arg::Kind::kInt:
        d.AddInt(kAnnotationIntValue, a.int_value);
        break;
      case Arg::Kind::kDouble:
        d.AddDouble(kAnnotationDoubleValue, a.double_value);
        break;
      case Arg::Kind::kString:
        d.AddString(kAnnotationStringValue, a.string_value);
        break;
    }
    e.AddMessage(kEventDebugAnnotations, d);
  }
  ProtoMessage p = Packet();
  p.AddVarint(kPacketTimestamp, timestamp_ns);
  p.AddMessage(kPacketTrackEvent, e);
  return p.data();
}

std::string SliceEndPacket(uint64_t timestamp_ns, uint64_t track_uuid) {
  ProtoMessage e;
  e.AddVarint(kEventType, static_cast<uint64_t>(EventType::kSliceEnd));
  e.AddVarint(kEventTrackUuid, track_uuid);
  ProtoMessage p = Packet();
  p.AddVarint(kPacketTimestamp, timestamp_ns);
  p.AddMessage(kPacketTrackEvent, e);
  return p.data();
}

std::string CounterPacket(uint64_t timestamp_ns, uint64_t track_uuid, int64_t value) {
  ProtoMessage e;
  e.AddVarint(kEventType, static_cast<uint64_t>(EventType::kCounter));
  e.AddVarint(kEventTrackUuid, track_uuid);
  e.AddInt(kEventCounterValue, value);
  ProtoMessage p = Packet();
  p.AddVarint(kPacketTimestamp, timestamp_ns);
  p.AddMessage(kPacketTrackEvent, e);
  return p.data();
}

void AppendFramedPacket(const std::string& packet, std::string* out) {
  AppendVarint((static_cast<uint64_t>(kTracePacket) << 3) | 2, out);
  AppendVarint(packet.size(), out);
  out->append(packet);
}

}  // namespace gw::perfetto
