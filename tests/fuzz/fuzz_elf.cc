// libFuzzer target: the ELF reader, on files anyone may have put on the library path or into a
// traced process's mappings: ElfFile (PT_LOAD mapping, .symtab/.dynsym functions and versions,
// data reads, DWARF lines through libdw) and ElfSymbolTable, the uprobe-placement index built on
// it (versioned names, endbr64 detection). The input is written to a memfd and opened through
// /proc/self/fd as a path, as the tools open files. Invariants: no crash or UB; offsets and
// addresses the readers return map back to each other.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "discover/elf_symbols.h"
#include "elf/elf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("fuzz_elf", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0) return 0;
  if (ftruncate(fd, 0) != 0) return 0;
  if (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;

  auto file = gw::ElfFile::Open(path);
  if (file.ok()) {
    gw::ElfFile& elf = **file;
    for (uint64_t probe : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0x10f9}, size / 2,
                           uint64_t{~0ull}, uint64_t{~0ull - 7}}) {
      if (const gw::ElfFunction* f = elf.FindFunction(probe)) {
        std::string_view name = elf.FunctionName(*f);
        if (!name.empty()) (void)elf.FunctionFileOffset(name);
        (void)elf.FindLine(f->address);
        (void)elf.ReadAddress(f->address, 64);
      }
      std::optional<uint64_t> address = elf.FileOffsetToAddress(probe);
      if (address) (void)elf.AddressToFileOffset(*address);
      (void)elf.ReadAddress(probe, 16);
      (void)elf.FindLine(probe);
    }
    (void)elf.SymbolAddress("_PyRuntime");
    (void)elf.SymbolAddress("gw_seed_add");
  }
  auto table = gw::ElfSymbolTable::Load(path);
  if (table.ok()) {
    for (const gw::ElfSymbol& s : table->symbols()) {
      (void)gw::ElfSymbolTable::ProbeOffset(s);
      if (table->Find(s.name) == nullptr) __builtin_trap();  // every symbol is found by name
      if (!s.version.empty()) (void)table->Find(s.name + "@" + s.version);
      if (table->size() > 64) break;
    }
    (void)table->Find("cudaMemcpy@@libcudart.so.13");
  }
  return 0;
}
