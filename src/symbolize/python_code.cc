#include "symbolize/python_code.h"

#include <sys/uio.h>

#include <cstdint>
#include <cstring>

namespace gw {

bool ProcessMemory::Read(uint64_t address, void* out, size_t size) const {
  if (address == 0) return false;
  struct iovec local = {out, size};
  struct iovec remote = {reinterpret_cast<void*>(address), size};
  ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(size);
}

std::optional<uint64_t> ProcessMemory::ReadU64(uint64_t address) const {
  uint64_t v = 0;
  if (!Read(address, &v, sizeof v)) return std::nullopt;
  return v;
}

namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

constexpr int64_t kMaxString = 4096;
constexpr int64_t kMaxLineTable = 1 << 20;

// Reads the type name of an object (ob_type->tp_name), to tell code objects from garbage.
std::optional<std::string> TypeName(const ProcessMemory& memory, uint64_t object) {
  std::optional<uint64_t> type = memory.ReadU64(object + 8);  // PyObject.ob_type
  if (!type) return std::nullopt;
  std::optional<uint64_t> name = memory.ReadU64(*type + 24);  // PyTypeObject.tp_name
  if (!name) return std::nullopt;
  char buf[16] = {};
  if (!memory.Read(*name, buf, sizeof buf - 1)) return std::nullopt;
  return std::string(buf, strnlen(buf, sizeof buf - 1));
}

// Reads an unsigned varint of the 3.11+ location table (6-bit chunks, bit 6 = more).
uint32_t ReadVarint(const std::string& t, size_t* i) {
  uint32_t value = 0;
  int shift = 0;
  while (*i < t.size()) {
    uint8_t b = static_cast<uint8_t>(t[(*i)++]);
    value |= static_cast<uint32_t>(b & 0x3f) << shift;
    shift += 6;
    if ((b & 0x40) == 0 || shift > 30) break;
  }
  return value;
}

int32_t ReadSignedVarint(const std::string& t, size_t* i) {
  uint32_t v = ReadVarint(t, i);
  return (v & 1) ? -static_cast<int32_t>(v >> 1) : static_cast<int32_t>(v >> 1);
}

// Line arithmetic runs in int64_t; a line outside int (only a corrupt table makes one) is "no
// line". Past kMaxLineMagnitude a table is corrupt: stop before the sum could overflow.
constexpr int64_t kMaxLineMagnitude = int64_t{1} << 40;

int AsLine(int64_t line) {
  return line >= INT32_MIN && line <= INT32_MAX ? static_cast<int>(line) : -1;
}

// 3.10 (PEP 626): pairs of (bytecode bytes advanced, signed line delta; -128 = no line).
int LineFor310(const std::string& t, int first_line, int64_t offset) {
  int64_t line = first_line;  // wide: the table and first line are the traced process's memory
  int64_t end = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    int64_t start = end;
    end += static_cast<uint8_t>(t[i]);
    int8_t delta = static_cast<int8_t>(t[i + 1]);
    int64_t current = -1;
    if (delta != -128) {
      line += delta;
      current = line;
    }
    if (offset >= start && offset < end) return AsLine(current);
  }
  return -1;
}

// 3.11+ location table (Objects/locations.md): entries of (code units, line delta, columns).
int LineFor311(const std::string& t, int first_line, int64_t offset) {
  int64_t unit = offset / 2;
  int64_t end = 0;
  int64_t line = first_line;  // wide: deltas are up to 2^31 each (a corrupt or hostile table)
  size_t i = 0;
  while (i < t.size()) {
    uint8_t head = static_cast<uint8_t>(t[i++]);
    if ((head & 0x80) == 0) return -1;  // not at an entry start: corrupt
    int code = (head >> 3) & 0x0f;
    int64_t start = end;
    end += (head & 0x07) + 1;
    if (line > kMaxLineMagnitude || line < -kMaxLineMagnitude) return -1;  // corrupt
    int64_t current = line;
    if (code == 15) {
      current = -1;           // no location
    } else if (code == 14) {  // long form
      line += ReadSignedVarint(t, &i);
      current = line;
      (void)ReadVarint(t, &i);  // end line delta
      (void)ReadVarint(t, &i);  // start column + 1
      (void)ReadVarint(t, &i);  // end column + 1
    } else if (code == 13) {    // no column
      line += ReadSignedVarint(t, &i);
      current = line;
    } else if (code >= 10) {  // one-line form: delta = code - 10, two column bytes
      line += code - 10;
      current = line;
      i += 2;
    } else {  // short form: same line, one column byte
      current = line;
      i += 1;
    }
    if (unit >= start && unit < end) return AsLine(current);
  }
  return -1;
}

}  // namespace

StatusOr<std::string> ReadPythonString(const ProcessMemory& memory, const PythonCodeLayout& layout,
                                       uint64_t address) {
  std::optional<uint64_t> length = memory.ReadU64(address + layout.unicode_length);
  uint32_t state = 0;
  if (!length || !memory.Read(address + layout.unicode_state, &state, sizeof state)) {
    return NotFound("str object unreadable");
  }
  unsigned kind = (state >> 2) & 7;
  bool compact = (state >> 5) & 1;
  bool ascii = (state >> 6) & 1;
  if (!compact || (kind != 1 && kind != 2 && kind != 4)) {
    return NotFound("str object not compact");
  }
  int64_t n = static_cast<int64_t>(*length);
  if (n < 0 || n > kMaxString) return DataLoss("str object length out of range");
  uint64_t data = address + (ascii ? layout.unicode_ascii_size : layout.unicode_compact_size);
  std::string raw(static_cast<size_t>(n) * kind, '\0');
  if (n > 0 && !memory.Read(data, raw.data(), raw.size())) return NotFound("str data unreadable");
  if (ascii) return raw;
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t cp = 0;
    std::memcpy(&cp, raw.data() + i * kind, kind);  // little-endian x86-64
    AppendUtf8(cp, &out);
  }
  return out;
}

StatusOr<PythonCode> ReadPythonCode(const ProcessMemory& memory, const PythonCodeLayout& layout,
                                    uint64_t address) {
  std::optional<std::string> type = TypeName(memory, address);
  if (!type) return NotFound("code object unreadable");
  if (*type != "code") return DataLoss("object is a " + *type + ", not a code object");
  PythonCode code;
  std::optional<uint64_t> filename = memory.ReadU64(address + layout.code_filename);
  std::optional<uint64_t> name =
      memory.ReadU64(address + (layout.code_qualname ? layout.code_qualname : layout.code_name));
  std::optional<uint64_t> linetable = memory.ReadU64(address + layout.code_linetable);
  int32_t first_line = 0;
  if (!filename || !name || !linetable ||
      !memory.Read(address + layout.code_firstlineno, &first_line, sizeof first_line)) {
    return NotFound("code object fields unreadable");
  }
  code.first_line = first_line;
  ASSIGN_OR_RETURN(code.filename, ReadPythonString(memory, layout, *filename));
  ASSIGN_OR_RETURN(code.name, ReadPythonString(memory, layout, *name));
  std::optional<uint64_t> size = memory.ReadU64(*linetable + layout.bytes_size);
  if (size && static_cast<int64_t>(*size) > 0 && static_cast<int64_t>(*size) < kMaxLineTable) {
    code.linetable.resize(*size);
    if (!memory.Read(*linetable + layout.bytes_sval, code.linetable.data(), *size)) {
      code.linetable.clear();
    }
  }
  return code;
}

int64_t PythonInstructionOffset(const PythonCodeLayout& layout, uint64_t code_address,
                                uint64_t instr) {
  if (layout.instr_is_index) return static_cast<int64_t>(static_cast<int32_t>(instr)) * 2;
  return static_cast<int64_t>(instr - (code_address + layout.code_adaptive));
}

int PythonLineForOffset(int minor, const std::string& linetable, int first_line, int64_t offset) {
  if (offset < 0) return first_line;  // frame created, first instruction not started yet
  return minor >= 11 ? LineFor311(linetable, first_line, offset)
                     : LineFor310(linetable, first_line, offset);
}

}  // namespace gw
