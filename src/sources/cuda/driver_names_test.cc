// DriverObjectNames over objects laid out in this process's own memory (no privileges).
#include "sources/cuda/driver_names.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace gw {
namespace {

// An object of 8 words; each test puts pointers (or not) where a driver might.
struct alignas(8) FakeObject {
  uint64_t words[DriverObjectNames::kScanWords] = {};
  void Put(int offset, const void* p) { words[offset / 8] = reinterpret_cast<uint64_t>(p); }
  uint64_t handle() const { return reinterpret_cast<uint64_t>(this); }
};

TEST(IsKernelSymbolTest, AcceptsIdentifiersAndMangledNames) {
  EXPECT_TRUE(IsKernelSymbol("triton_poi_fused_add_0"));
  EXPECT_TRUE(IsKernelSymbol("_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT0_T1_"));
  EXPECT_TRUE(IsKernelSymbol("sm90_xmma_gemm_f16f16_f16f32.tn$x"));
  EXPECT_FALSE(IsKernelSymbol(""));
  EXPECT_FALSE(IsKernelSymbol("k"));
  EXPECT_FALSE(IsKernelSymbol("9lives"));
  EXPECT_FALSE(IsKernelSymbol("/usr/lib/libcublas.so"));
  EXPECT_FALSE(IsKernelSymbol("two words"));
  EXPECT_FALSE(IsKernelSymbol(std::string(5000, 'a')));
}

TEST(DriverObjectNamesTest, ReadsTheOnlyNamePointerInAnotherProcessesMemory) {
  // process_vm_readv on our own pid: the same path as on a traced job.
  static const char kName[] = "_Z11gemm_kernelPKfS0_Pfiii";
  static const char kPath[] = "/opt/model/weights.bin";  // a string, but not a symbol
  FakeObject o;
  o.words[0] = 7;  // a kind word
  o.Put(8, kPath);
  o.Put(24, kName);
  o.words[4] = 0xdeadbeef00000000ULL;  // not a user address
  DriverObjectNames names;
  EXPECT_EQ(names.Read(getpid(), o.handle()), kName);
  EXPECT_EQ(names.offset(), 24);
  EXPECT_FALSE(names.confirmed());
}

TEST(DriverObjectNamesTest, UnreadableOrNamelessHandlesAreEmpty) {
  DriverObjectNames names;
  EXPECT_EQ(names.Read(getpid(), 0), "");
  EXPECT_EQ(names.Read(getpid(), 0x10), "");             // below user space
  EXPECT_EQ(names.Read(getpid(), 0x7ffffffff000ULL), ""); // unmapped
  FakeObject empty;
  EXPECT_EQ(names.Read(getpid(), empty.handle()), "");
  EXPECT_EQ(names.offset(), -1);
}

TEST(DriverObjectNamesTest, AmbiguousObjectsFollowTheOffsetOthersAgreedOn) {
  static const char kA[] = "kernel_alpha";
  static const char kB[] = "kernel_beta";
  static const char kDecoy[] = "module_name_decoy";
  DriverObjectNames names;
  FakeObject two;  // two different symbol-like strings: undecidable on its own
  two.Put(0, kDecoy);
  two.Put(16, kB);
  EXPECT_EQ(names.Read(getpid(), two.handle()), "");
  FakeObject one;  // unambiguous: votes for offset 16
  one.Put(16, kA);
  EXPECT_EQ(names.Read(getpid(), one.handle()), kA);
  EXPECT_EQ(names.Read(getpid(), two.handle()), kB);
}

TEST(DriverObjectNamesTest, OneStringThroughSeveralWordsIsOneName) {
  // e.g. a raw pointer and a std::string's data pointer to the same characters.
  std::string owned = "layernorm_forward_kernel_with_a_long_name";
  FakeObject o;
  o.Put(8, owned.c_str());
  o.Put(16, owned.c_str());
  DriverObjectNames names;
  EXPECT_EQ(names.Read(getpid(), o.handle()), owned);
}

TEST(DriverObjectNamesTest, LearnConfirmsTheOffsetFromAKnownName) {
  static const char kKnown[] = "known_kernel";
  static const char kOther[] = "other_kernel";
  static const char kDecoy[] = "decoy_string";
  FakeObject known;
  known.Put(0, kDecoy);
  known.Put(40, kKnown);
  DriverObjectNames names;
  names.Learn(getpid(), known.handle(), "known_kernel");
  ASSERT_TRUE(names.confirmed());
  EXPECT_EQ(names.offset(), 40);
  FakeObject other;  // ambiguous without the confirmed offset
  other.Put(0, kDecoy);
  other.Put(40, kOther);
  EXPECT_EQ(names.Read(getpid(), other.handle()), kOther);
}

TEST(DriverObjectNamesTest, LearnMatchesANameCutToTheRecordsLength) {
  std::string full(700, 'k');
  full[0] = '_';
  FakeObject o;
  o.Put(8, full.c_str());
  DriverObjectNames names;
  names.Learn(getpid(), o.handle(), full.substr(0, 487));
  EXPECT_TRUE(names.confirmed());
  EXPECT_EQ(names.Read(getpid(), o.handle()), full);
}

TEST(DriverObjectNamesTest, NamesCrossingAPageAreRead) {
  // A name that starts 5 bytes before a page boundary: reads are split per page.
  long page = sysconf(_SC_PAGESIZE);
  static char buf[3 * 8192] __attribute__((aligned(8192)));
  char* at = buf + page - 5;
  std::strcpy(at, "straddling_kernel_name");
  FakeObject o;
  o.Put(8, at);
  DriverObjectNames names;
  EXPECT_EQ(names.Read(getpid(), o.handle()), "straddling_kernel_name");
}

}  // namespace
}  // namespace gw
