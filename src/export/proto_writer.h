// A minimal protobuf wire-format encoder: varints, fixed64/double and length-delimited fields
// (strings, bytes, nested messages). Enough to write Perfetto TracePackets without a protobuf
// library; the field numbers live with the messages that use them (perfetto_trace.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gw {

// One message being built. Nested messages are built in their own ProtoMessage and appended
// with AddMessage (the length prefix needs the finished size).
class ProtoMessage {
 public:
  // Wire type 0. Signed values are written as two's complement (int32/int64, not sint).
  void AddVarint(uint32_t field, uint64_t value);
  void AddInt(uint32_t field, int64_t value) { AddVarint(field, static_cast<uint64_t>(value)); }
  void AddBool(uint32_t field, bool value) { AddVarint(field, value ? 1 : 0); }
  // Wire type 1.
  void AddFixed64(uint32_t field, uint64_t value);
  void AddDouble(uint32_t field, double value);
  // Wire type 2.
  void AddBytes(uint32_t field, std::string_view bytes);
  void AddString(uint32_t field, std::string_view text) { AddBytes(field, text); }
  void AddMessage(uint32_t field, const ProtoMessage& message) { AddBytes(field, message.data_); }

  const std::string& data() const { return data_; }
  bool empty() const { return data_.empty(); }
  void Clear() { data_.clear(); }

 private:
  void Tag(uint32_t field, uint32_t wire_type);
  void Varint(uint64_t value);

  std::string data_;
};

// Appends `value` as a base-128 varint (for tests and the framing of top-level packets).
void AppendVarint(uint64_t value, std::string* out);

}  // namespace gw
