// Unit tests for the symbolizer's building blocks: maps parsing, CPython line tables (against
// fixtures recorded from the real interpreters' co_lines()), and splicing.
#include <elf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "elf/elf_file.h"
#include "symbolize/process_maps.h"
#include "symbolize/python_code.h"
#include "symbolize/symbolizer.h"

namespace gw {
namespace {

TEST(ProcessMapsTest, ParsesAndFinds) {
  ProcessMaps maps = ProcessMaps::Parse(
      "55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1234 /usr/bin/python3.12\n"
      "55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:01 1234 /usr/bin/python3.12\n"
      "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f1000000000-7f1000001000 r-xp 00002000 fe:01 99 /tmp/lib gone.so (deleted)\n");
  ASSERT_EQ(maps.regions().size(), 5u);
  const MappedRegion* r = maps.Find(0x55d0c0a01010);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->path, "/usr/bin/python3.12");
  EXPECT_TRUE(r->executable);
  EXPECT_EQ(r->file_offset, 0x1000u);
  EXPECT_EQ(maps.Find(0x7f1000000010)->path, "/tmp/lib gone.so");
  EXPECT_EQ(maps.Find(0x7ffd00000100)->path, "[stack]");
  EXPECT_EQ(maps.Find(0x1000), nullptr);
  EXPECT_EQ(maps.AddressOfFileOffset("/usr/bin/python3.12", 0x1800), 0x55d0c0a01800u);
}

// A broken frame-pointer chain puts unmapped junk into many stacks: the maps are not re-read
// for it while the process's executable mappings (VmLib) stay the same, and a library mapped
// since (VmLib moved) is still found. Trigger: 200 stacks with an address outside every
// mapping of a fake /proc, then a new mapping. Assert: maps reads, and the frame's module.
TEST(SymbolizerTest, UnmappedAddressesRereadTheMapsOnlyWhenTheMappingsChanged) {
  char dir_template[] = "/tmp/gw_symbolize_proc_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string root = dir_template;
  const int32_t pid = 4242;
  ASSERT_EQ(mkdir((root + "/4242").c_str(), 0700), 0);
  const std::string maps_path = root + "/4242/maps";
  const std::string status_path = root + "/4242/status";
  std::ofstream(maps_path) << "00400000-00401000 r-xp 00000000 00:00 0 /nonexistent/app\n";
  std::ofstream(status_path) << "Name:\tpython3\nVmLib:\t    1200 kB\n";
  Symbolizer symbolizer(root);
  ASSERT_TRUE(symbolizer.SnapshotProcess(pid).ok());
  RawStack stack;
  stack.pid = pid;
  stack.native = {0x400010, 0x7f0000001000, 0x7f0000001800};
  for (int i = 0; i < 200; ++i) {
    std::vector<Frame> frames = symbolizer.Symbolize(stack);
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[1].module, "[anon]");
  }
  EXPECT_EQ(symbolizer.maps_reads(), 1) << "junk alone: no maps read per stack";

  std::ofstream(maps_path, std::ios::app)
      << "7f0000000000-7f0000002000 r-xp 00000000 00:00 0 /nonexistent/libnew.so\n";
  std::ofstream(status_path) << "Name:\tpython3\nVmLib:\t    1208 kB\n";
  std::vector<Frame> frames = symbolizer.Symbolize(stack);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[1].module, "/nonexistent/libnew.so");
  EXPECT_EQ(frames[2].module, "/nonexistent/libnew.so");
  EXPECT_EQ(symbolizer.maps_reads(), 2) << "one read for the new mapping";
  std::filesystem::remove_all(root);
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Every instruction offset of a sample function, for 3.10–3.13: our decoder agrees with the
// interpreter's own co_lines() (testdata/make_linetables.py recorded them).
TEST(PythonLineTableTest, MatchesInterpreterCoLines) {
  std::ifstream in(std::string(GW_SYMBOLIZE_TESTDATA) + "/linetables.txt");
  ASSERT_TRUE(in) << "missing testdata/linetables.txt";
  std::string row;
  int versions = 0;
  while (std::getline(in, row)) {
    std::istringstream fields(row);
    std::string version, hex, pairs;
    int first_line = 0;
    fields >> version >> first_line >> hex >> pairs;
    int minor = std::stoi(version.substr(2));
    std::string table = FromHex(hex);
    std::istringstream items(pairs);
    std::string item;
    int checked = 0;
    while (std::getline(items, item, ',')) {
      size_t colon = item.find(':');
      int64_t offset = std::stoll(item.substr(0, colon));
      int line = std::stoi(item.substr(colon + 1));
      EXPECT_EQ(PythonLineForOffset(minor, table, first_line, offset), line)
          << version << " offset " << offset;
      ++checked;
    }
    EXPECT_GT(checked, 40) << version;
    ++versions;
  }
  EXPECT_EQ(versions, 4);
}

TEST(PythonLineTableTest, NotStartedFrameIsFirstLine) {
  EXPECT_EQ(PythonLineForOffset(12, "", 7, -2), 7);
}

// Found by fuzz_stacks: a line table (the traced process's memory) whose deltas sum past
// INT_MAX overflowed a signed int (UBSan abort; a wrapped negative line in release builds).
TEST(PythonLineTableTest, HostileTablesDoNotOverflow) {
  // 3.11+: three "no column" entries, each one code unit and line delta +(2^31 - 1).
  const std::string huge_delta = "\xe8\x7e\x7f\x7f\x7f\x7f\x03";
  const std::string table = huge_delta + huge_delta + huge_delta;
  for (int64_t offset : {0, 2, 4, 6}) {
    int line = PythonLineForOffset(13, table, 1, offset);
    EXPECT_TRUE(line == -1 || line > 0) << "offset " << offset << ": line " << line;
  }
  EXPECT_EQ(PythonLineForOffset(13, table, 1, 4), -1);
  // 3.10: first line INT_MAX (co_firstlineno is the process's memory too) plus one.
  EXPECT_EQ(PythonLineForOffset(10, std::string("\x02\x01", 2), INT32_MAX, 0), -1);
  EXPECT_EQ(PythonLineForOffset(10, std::string("\x02\x01", 2), 41, 0), 42);
}

// Found by fuzz_elf: a PT_LOAD segment whose file offset is near 2^64 made ReadAddress's
// bounds check wrap (offset + size), and it read far outside the mapped file.
TEST(ElfFileTest, ReadAddressChecksHostileSegmentOffsets) {
  char path[] = "/tmp/gw_elf_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof eh;
  eh.e_ehsize = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  Elf64_Phdr ph[2]{};
  ph[0].p_type = PT_LOAD;  // hostile: its bytes "start" 8 bytes before 2^64
  ph[0].p_vaddr = 0x1000;
  ph[0].p_offset = ~uint64_t{0} - 7;
  ph[0].p_filesz = ph[0].p_memsz = 0x1000;
  ph[1].p_type = PT_LOAD;  // honest: the headers themselves, at 0x10000
  ph[1].p_vaddr = 0x10000;
  ph[1].p_offset = 0;
  ph[1].p_filesz = ph[1].p_memsz = sizeof eh + sizeof ph;
  ASSERT_EQ(write(fd, &eh, sizeof eh), static_cast<ssize_t>(sizeof eh));
  ASSERT_EQ(write(fd, ph, sizeof ph), static_cast<ssize_t>(sizeof ph));
  close(fd);
  auto elf = ElfFile::Open(path);
  unlink(path);
  ASSERT_TRUE(elf.ok()) << elf.status().message();
  EXPECT_FALSE((*elf)->ReadAddress(0x1000, 16).has_value());
  EXPECT_FALSE((*elf)->ReadAddress(0x1ff8, 16).has_value());
  std::optional<std::string> magic = (*elf)->ReadAddress(0x10000, 4);
  ASSERT_TRUE(magic.has_value());
  EXPECT_EQ(*magic, std::string(ELFMAG, SELFMAG));
  EXPECT_FALSE((*elf)->ReadAddress(0x10000, sizeof eh + sizeof ph + 1).has_value());
}

TEST(PythonInstructionOffsetTest, PerVersion) {
  PythonCodeLayout v310;
  v310.instr_is_index = true;
  EXPECT_EQ(PythonInstructionOffset(v310, 0x1000, 21), 42);
  EXPECT_EQ(PythonInstructionOffset(v310, 0x1000, 0xffffffffu), -2);  // f_lasti = -1
  PythonCodeLayout v312;
  v312.code_adaptive = 192;
  EXPECT_EQ(PythonInstructionOffset(v312, 0x1000, 0x1000 + 192 + 40), 40);
}

Frame Native(const std::string& function, const std::string& module = "/lib/libpython3.12.so") {
  Frame f;
  f.function = function;
  f.module = module;
  return f;
}
Frame Py(const std::string& function) {
  Frame f;
  f.kind = FrameKind::kPython;
  f.function = function;
  return f;
}
std::vector<std::string> Names(const std::vector<Frame>& frames) {
  std::vector<std::string> out;
  for (const Frame& f : frames) out.push_back(f.function);
  return out;
}

TEST(SpliceFramesTest, ReplacesEvalFramesByTheirPythonFrames) {
  // cudaStreamSynchronize ← (C) ← eval[f, g] ← (C call-in) ← eval[<module>]
  std::vector<Frame> native = {Native("cudaStreamSynchronize", "/lib/libcudart.so"),
                               Native("_PyObject_Call"),
                               Native("_PyEval_EvalFrameDefault"),
                               Native("PyObject_Vectorcall"),
                               Native("_PyEval_EvalFrameDefault"),
                               Native("Py_RunMain"),
                               Native("main", "/usr/bin/python3")};
  std::vector<Frame> python = {Py("f"), Py("g"), Py("<module>")};
  std::vector<Frame> out =
      SpliceFrames(native, python, {false, true, true}, "/lib/libpython3.12.so");
  EXPECT_EQ(Names(out),
            (std::vector<std::string>{"cudaStreamSynchronize", "_PyObject_Call", "f", "g",
                                      "PyObject_Vectorcall", "<module>", "Py_RunMain", "main"}));
}

TEST(SpliceFramesTest, WithoutEvalFramesPythonGoesWhereTheWalkBroke) {
  std::vector<Frame> native = {Native("gw_stack_target", "/t/lib.so"), Native("", "/lib/libffi.so"),
                               Native("", "[stack]")};
  std::vector<Frame> python = {Py("step"), Py("main")};
  std::vector<Frame> out = SpliceFrames(native, python, {false, true}, "/lib/libpython3.11.so");
  EXPECT_EQ(Names(out), (std::vector<std::string>{"gw_stack_target", "", "step", "main", ""}));
  EXPECT_EQ(out[4].module, "[stack]");
}

TEST(SymbolizerTest, LocationPrefersPython) {
  Frame native = Native("cudaMalloc", "/lib/libcudart.so");
  Frame py = Py("step");
  py.file = "/x/train.py";
  py.line = 12;
  EXPECT_EQ(Symbolizer::Location({native, py}), "/x/train.py:12");
  EXPECT_EQ(Symbolizer::Location({native}), "cudaMalloc");
  std::string json = Symbolizer::ToJson({native, py});
  EXPECT_NE(json.find("\"kind\":\"py\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"module\":\"/lib/libcudart.so\""), std::string::npos) << json;
}

TEST(FrameTest, DisplayUnresolvedKeepsModuleOffset) {
  Frame f;
  f.module = "/usr/lib/libfoo.so.1";
  f.offset = 0x1234;
  EXPECT_EQ(f.Display(), "libfoo.so.1+0x1234");
  f.function = "foo";
  f.function_offset = 0x10;
  f.file = "foo.c";
  f.line = 3;
  EXPECT_EQ(f.Display(), "foo+0x10 (foo.c:3)");
}

}  // namespace
}  // namespace gw
