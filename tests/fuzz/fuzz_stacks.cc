// libFuzzer target: the decoders that turn captured stack data into frames. Their inputs come
// from the traced process (its memory is read after the BPF capture) or from a stored row:
//   mode 0–3: a CPython 3.10–3.13 line table (co_linetable bytes, co_firstlineno and the frame's
//             instruction offset are all the traced process's memory) → PythonLineForOffset;
//   mode 4:   a _Py_DebugOffsets block (the first bytes of _PyRuntime) → the walker's offsets;
//   mode 5:   frames (kind, function, file, line, module from the input) → SpliceFrames, the
//             stored `frames` JSON (Symbolizer::ToJson) and Location, as the stacks table gets
//             them; the JSON must parse back to as many frames.
// Input: byte 0 = mode, bytes 1–4 first line (int32 LE), bytes 5–8 offset (int32 LE), the rest
// the table / block / frame text. Invariants: no crash or UB (signed overflow in line
// arithmetic included); offsets accepted fit the BPF frame read; the JSON is valid.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sources/stacks/python_offsets.h"
#include "symbolize/python_code.h"
#include "symbolize/symbolizer.h"

namespace {

int32_t Le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<int32_t>(v);
}

std::vector<gw::Frame> FramesFrom(const std::string& text, bool python) {
  std::vector<gw::Frame> frames;
  size_t start = 0;
  while (start < text.size() && frames.size() < 64) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(start, end - start);
    gw::Frame f;
    f.kind = python ? gw::FrameKind::kPython : gw::FrameKind::kNative;
    size_t a = part.find('|');
    f.function = part.substr(0, a);
    if (a != std::string::npos) {
      size_t b = part.find('|', a + 1);
      f.file = part.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
      if (b != std::string::npos) f.module = part.substr(b + 1);
    }
    f.line = static_cast<int>(part.size()) - 3;
    f.function_offset = part.size() * 0x10;
    f.offset = f.address = part.size() << 12;
    frames.push_back(std::move(f));
    start = end + 1;
  }
  return frames;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const int mode = data[0] % 6;
  const int32_t first_line = Le32(data + 1);
  const int32_t offset = Le32(data + 5);
  const std::string rest(reinterpret_cast<const char*>(data + 9), size - 9);
  if (mode <= 3) {
    const int minor = 10 + mode;
    // The frame's own offset, and every instruction of the table.
    (void)gw::PythonLineForOffset(minor, rest, first_line, offset);
    for (int64_t at = 0; at < static_cast<int64_t>(rest.size()) * 8 + 4; at += 2) {
      (void)gw::PythonLineForOffset(minor, rest, first_line, at);
    }
  } else if (mode == 4) {
    auto parsed = gw::PythonOffsetsFromDebugOffsets(rest);
    if (parsed.ok() && parsed->bpf.frame_read_size > GW_PY_FRAME_READ_MAX) __builtin_trap();
  } else {
    size_t split = rest.find('\x01');
    std::vector<gw::Frame> native = FramesFrom(rest.substr(0, split), false);
    std::vector<gw::Frame> python = split == std::string::npos
                                        ? std::vector<gw::Frame>()
                                        : FramesFrom(rest.substr(split + 1), true);
    std::vector<bool> entry;
    for (size_t i = 0; i < python.size(); ++i) entry.push_back(((offset >> (i % 31)) & 1) != 0);
    std::vector<gw::Frame> frames =
        gw::SpliceFrames(native, python, entry, native.empty() ? "" : native[0].module);
    std::string json = gw::Symbolizer::ToJson(frames);
    nlohmann::json back = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (back.is_discarded() || !back.is_array() || back.size() != frames.size()) __builtin_trap();
    (void)gw::Symbolizer::Location(frames);
    for (const gw::Frame& f : frames) (void)f.Display();
  }
  return 0;
}
