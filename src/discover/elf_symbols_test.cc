#include "discover/elf_symbols.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gw {
namespace {

std::vector<unsigned char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The fake runtime is built with a version script ("libcudart.so.13") and CET (endbr64).
TEST(ElfSymbolsTest, ResolvesVersionedSymbolsToFileOffsets) {
  const std::string path = std::string(GW_FAKE_CUDA_DIR) + "/libcudart.so.13";
  auto table = ElfSymbolTable::Load(path);
  ASSERT_TRUE(table.ok()) << table.status().message();
  const ElfSymbol* memcpy_sym = table->Find("cudaMemcpy");
  ASSERT_NE(memcpy_sym, nullptr);
  EXPECT_EQ(memcpy_sym->version, "libcudart.so.13");
  EXPECT_TRUE(memcpy_sym->default_version);
  EXPECT_TRUE(memcpy_sym->from_dynsym);
  EXPECT_EQ(table->Find("cudaMemcpy@@libcudart.so.13"), memcpy_sym);
  EXPECT_EQ(table->Find("cudaMemcpy@@libcudart.so.12"), nullptr);
  EXPECT_EQ(table->Find("cudaNoSuchFunction"), nullptr);
  EXPECT_TRUE(memcpy_sym->starts_with_endbr64);
  EXPECT_EQ(ElfSymbolTable::ProbeOffset(*memcpy_sym), memcpy_sym->file_offset + 4);

  // The bytes at the file offset are the bytes the dynamic loader maps at the symbol.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  std::vector<unsigned char> file = ReadFile(path);
  for (const char* name : {"cudaMemcpy", "cudaMalloc", "cudaLaunchKernel", "cudaFree"}) {
    const ElfSymbol* s = table->Find(name);
    ASSERT_NE(s, nullptr) << name;
    auto* mapped = static_cast<const unsigned char*>(dlsym(lib, name));
    ASSERT_NE(mapped, nullptr) << name;
    ASSERT_LE(s->file_offset + 16, file.size());
    EXPECT_EQ(std::memcmp(mapped, file.data() + s->file_offset, 16), 0) << name;
  }
  dlclose(lib);
}

TEST(ElfSymbolsTest, MissingFileIsAnError) {
  auto table = ElfSymbolTable::Load("/nonexistent/libcudart.so.13");
  EXPECT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("/nonexistent/libcudart.so.13"), std::string::npos);
}

TEST(ElfSymbolsTest, RealCudaRuntime) {
  const std::string path = "/usr/local/cuda-13.0/lib/libcudart.so.13";
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " not present";
  auto table = ElfSymbolTable::Load(path);
  ASSERT_TRUE(table.ok()) << table.status().message();
  std::vector<unsigned char> file = ReadFile(path);
  for (const char* name : {"cudaLaunchKernel", "cudaMemcpy", "cudaMemcpyAsync", "cudaMalloc",
                           "cudaStreamSynchronize", "cudaDeviceSynchronize",
                           "__cudaRegisterFunction", "cudaGraphLaunch"}) {
    const ElfSymbol* s = table->Find(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->version, "libcudart.so.13") << name;
    EXPECT_TRUE(s->default_version) << name;
    ASSERT_LT(s->file_offset, file.size());
    // This build keeps frame pointers: every probed function opens with push %rbp (0x55).
    EXPECT_FALSE(s->starts_with_endbr64) << name;
    EXPECT_EQ(file[s->file_offset], 0x55) << name;
  }
  EXPECT_NE(table->Find("cudaMemcpy@@libcudart.so.13"), nullptr);
}

}  // namespace
}  // namespace gw
