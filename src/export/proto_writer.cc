#include "export/proto_writer.h"

#include <cstring>

namespace gw {

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void ProtoMessage::Varint(uint64_t value) { AppendVarint(value, &data_); }

void ProtoMessage::Tag(uint32_t field, uint32_t wire_type) {
  Varint((static_cast<uint64_t>(field) << 3) | wire_type);
}

void ProtoMessage::AddVarint(uint32_t field, uint64_t value) {
  Tag(field, 0);
  Varint(value);
}

void ProtoMessage::AddFixed64(uint32_t field, uint64_t value) {
  Tag(field, 1);
  for (int i = 0; i < 8; ++i) data_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void ProtoMessage::AddDouble(uint32_t field, double value) {
  uint64_t bits = 0;
  static_assert(sizeof bits == sizeof value);
  std::memcpy(&bits, &value, sizeof bits);
  AddFixed64(field, bits);
}

void ProtoMessage::AddBytes(uint32_t field, std::string_view bytes) {
  Tag(field, 2);
  Varint(bytes.size());
  data_.append(bytes.data(), bytes.size());
}

}  // namespace gw
