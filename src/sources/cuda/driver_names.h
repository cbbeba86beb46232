// Kernel names read from the CUDA driver's own function objects.
//
// A driver launch's handle (a CUfunction, or a CUkernel passed in its place) points at an
// object in which the driver keeps a pointer to the kernel's name: that pointer is what
// cuFuncGetName / cuKernelGetName return. When trace attaches after the job loaded its kernels,
// the name lookups (cuModuleGetFunction, cuLibraryGetKernel) happened before the probes
// existed, but the objects are still there: reading the job's memory (process_vm_readv) at
// the handle finds the name.
//
// Where in the object the pointer sits is the driver's private layout, so it is learned, not
// assumed: from handles whose names are known from records (Learn), else by scanning the
// object's first words for a pointer to a string that is a valid kernel symbol and voting
// across handles. On driver 580 (CUDA 13.0, H200) it is offset 8 for CUfunction and CUkernel
// objects alike (docs/kernel-names.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace gw {

// Whether `s` can be a kernel's symbol name: a C identifier or an Itanium-mangled name
// (letters, digits, '_', '$', '.'), 2 to 4095 characters, not starting with a digit.
bool IsKernelSymbol(const std::string& s);

class DriverObjectNames {
 public:
  // Reads n bytes of process pid at addr; false when any of it is unreadable.
  using ReadMemory = std::function<bool(int32_t pid, uint64_t addr, void* out, size_t n)>;

  // Default: process_vm_readv (root, or the same user with ptrace access).
  DriverObjectNames();
  explicit DriverObjectNames(ReadMemory read);

  // The raw (mangled) name the object at `handle` in `pid` points to; "" when there is none
  // (unreadable, not a driver object, no plausible name pointer).
  std::string Read(int32_t pid, uint64_t handle);

  // `handle` in `pid` is known to be called `raw_name` (a name record): the offset at which
  // its object points to that name is confirmed and used from then on.
  void Learn(int32_t pid, uint64_t handle, const std::string& raw_name);

  // The offset in use: confirmed by Learn, else the best-voted one; -1 while there is none.
  int offset() const;
  bool confirmed() const { return confirmed_ >= 0; }

  // How many words at the start of an object are searched for the name pointer.
  static constexpr int kScanWords = 8;

 private:
  std::string StringAt(int32_t pid, uint64_t addr);
  std::string NameAt(int32_t pid, uint64_t handle, int offset);

  ReadMemory read_;
  int confirmed_ = -1;
  std::map<int, int> votes_;  // offset → handles whose only plausible name pointer sits there
};

// process_vm_readv, split at page boundaries so a string near the end of a mapping reads.
bool ReadProcessMemory(int32_t pid, uint64_t addr, void* out, size_t n);

}  // namespace gw
