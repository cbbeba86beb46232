// Perfetto's TracePacket protobuf format (protos/perfetto/trace/*.proto), the subset gpuwhy
// writes: track descriptors (process, thread, plain and counter tracks), TrackEvent slices,
// instants and counters with debug annotations, and a clock snapshot. The field numbers below
// are Perfetto's published ones; a wrong number makes the trace unreadable, so each names its
// message and field. Packets are written as `Trace.packet` (field 1) records, the layout of a
// .perfetto-trace file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "export/proto_writer.h"

namespace gw::perfetto {

// Trace
inline constexpr uint32_t kTracePacket = 1;
// TracePacket
inline constexpr uint32_t kPacketClockSnapshot = 6;
inline constexpr uint32_t kPacketTimestamp = 8;
inline constexpr uint32_t kPacketTrustedSequenceId = 10;
inline constexpr uint32_t kPacketTrackEvent = 11;
inline constexpr uint32_t kPacketSequenceFlags = 13;
inline constexpr uint32_t kPacketTrackDescriptor = 60;
inline constexpr uint64_t kSeqIncrementalStateCleared = 1;  // TracePacket.SequenceFlags
// ClockSnapshot / ClockSnapshot.Clock
inline constexpr uint32_t kClockSnapshotClocks = 1;
inline constexpr uint32_t kClockId = 1;
inline constexpr uint32_t kClockTimestamp = 2;
inline constexpr uint64_t kBuiltinClockRealtime = 1;
inline constexpr uint64_t kBuiltinClockBoottime = 6;
// TrackDescriptor
inline constexpr uint32_t kTrackUuid = 1;
inline constexpr uint32_t kTrackName = 2;
inline constexpr uint32_t kTrackProcess = 3;
inline constexpr uint32_t kTrackThread = 4;
inline constexpr uint32_t kTrackParentUuid = 5;
inline constexpr uint32_t kTrackCounter = 8;
// ProcessDescriptor
inline constexpr uint32_t kProcessPid = 1;
inline constexpr uint32_t kProcessCmdline = 2;
inline constexpr uint32_t kProcessName = 6;
// ThreadDescriptor
inline constexpr uint32_t kThreadPid = 1;
inline constexpr uint32_t kThreadTid = 2;
inline constexpr uint32_t kThreadName = 5;
// CounterDescriptor
inline constexpr uint32_t kCounterUnit = 3;
inline constexpr uint64_t kCounterUnitCount = 2;  // CounterDescriptor.Unit.UNIT_COUNT
// TrackEvent
inline constexpr uint32_t kEventDebugAnnotations = 4;
inline constexpr uint32_t kEventType = 9;
inline constexpr uint32_t kEventTrackUuid = 11;
inline constexpr uint32_t kEventCategories = 22;
inline constexpr uint32_t kEventName = 23;
inline constexpr uint32_t kEventCounterValue = 30;
enum class EventType : uint64_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };
// DebugAnnotation
inline constexpr uint32_t kAnnotationIntValue = 4;
inline constexpr uint32_t kAnnotationDoubleValue = 5;
inline constexpr uint32_t kAnnotationStringValue = 6;
inline constexpr uint32_t kAnnotationName = 10;

// All packets go on one writer sequence.
inline constexpr uint64_t kSequenceId = 1;

// One debug annotation (shown as the event's "args" in the UI and trace processor).
struct Arg {
  enum class Kind { kInt, kDouble, kString };
  std::string name;
  Kind kind = Kind::kInt;
  int64_t int_value = 0;
  double double_value = 0;
  std::string string_value;
  static Arg Int(std::string n, int64_t v) { return {std::move(n), Kind::kInt, v, 0, {}}; }
  static Arg Double(std::string n, double v) { return {std::move(n), Kind::kDouble, 0, v, {}}; }
  static Arg Str(std::string n, std::string v) {
    return {std::move(n), Kind::kString, 0, 0, std::move(v)};
  }
};

// Each returns one serialized TracePacket (without the Trace.packet framing).
std::string ClockSnapshotPacket(uint64_t timestamp_ns, bool first_on_sequence);
std::string ProcessTrackPacket(uint64_t uuid, int32_t pid, const std::string& name,
                               const std::string& cmdline);
std::string ThreadTrackPacket(uint64_t uuid, int32_t pid, int32_t tid, const std::string& name);
// A plain track (slices, instants); parent_uuid 0 = top level.
std::string TrackPacket(uint64_t uuid, uint64_t parent_uuid, const std::string& name);
std::string CounterTrackPacket(uint64_t uuid, uint64_t parent_uuid, const std::string& name);
// A slice begin or an instant (name, category, args); a slice end; a counter value.
std::string EventPacket(uint64_t timestamp_ns, EventType type, uint64_t track_uuid,
                        const std::string& name, const char* category,
                        const std::vector<Arg>& args);
std::string SliceEndPacket(uint64_t timestamp_ns, uint64_t track_uuid);
std::string CounterPacket(uint64_t timestamp_ns, uint64_t track_uuid, int64_t value);

// Frames a packet as one `repeated TracePacket packet = 1` record of the Trace message.
void AppendFramedPacket(const std::string& packet, std::string* out);

}  // namespace gw::perfetto
