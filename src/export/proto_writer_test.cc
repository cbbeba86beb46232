#include "export/proto_writer.h"

#include <gtest/gtest.h>

#include "export/perfetto_trace.h"

namespace gw {
namespace {

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s.push_back(static_cast<char>(v));
  return s;
}

TEST(ProtoWriter, VarintsAsTheSpecShowsThem) {
  std::string out;
  AppendVarint(1, &out);
  EXPECT_EQ(out, Bytes({0x01}));
  out.clear();
  AppendVarint(300, &out);  // the protobuf encoding guide's example
  EXPECT_EQ(out, Bytes({0xac, 0x02}));
  out.clear();
  AppendVarint(UINT64_MAX, &out);
  EXPECT_EQ(out.size(), 10u);
}

TEST(ProtoWriter, FieldsAndNesting) {
  ProtoMessage m;
  m.AddVarint(1, 150);  // "08 96 01"
  EXPECT_EQ(m.data(), Bytes({0x08, 0x96, 0x01}));
  ProtoMessage s;
  s.AddString(2, "testing");  // "12 07 74 65 73 74 69 6e 67"
  EXPECT_EQ(s.data(), Bytes({0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}));
  ProtoMessage outer;
  outer.AddMessage(3, m);  // "1a 03 08 96 01"
  EXPECT_EQ(outer.data(), Bytes({0x1a, 0x03, 0x08, 0x96, 0x01}));
  ProtoMessage neg;
  neg.AddInt(4, -1);  // int64 -1: ten bytes of varint
  EXPECT_EQ(neg.data().size(), 11u);
  ProtoMessage d;
  d.AddDouble(5, 1.0);  // wire type 1, little-endian IEEE 754
  EXPECT_EQ(d.data(), Bytes({0x29, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}));
}

TEST(PerfettoTrace, SliceEndPacketLayout) {
  // TracePacket{trusted_packet_sequence_id(10)=1, timestamp(8)=5,
  //             track_event(11)={type(9)=2, track_uuid(11)=7}}
  std::string p = perfetto::SliceEndPacket(5, 7);
  EXPECT_EQ(p, Bytes({0x50, 0x01, 0x40, 0x05, 0x5a, 0x04, 0x48, 0x02, 0x58, 0x07}));
  std::string framed;
  perfetto::AppendFramedPacket(p, &framed);  // Trace.packet (1), length-delimited
  EXPECT_EQ(framed.substr(0, 2), Bytes({0x0a, static_cast<int>(p.size())}));
}

}  // namespace
}  // namespace gw
