#include "sources/cuda/driver_names.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "sources/cuda/cuda_abi.h"

namespace gw {
namespace {

constexpr uint64_t kPage = 4096;
constexpr size_t kMaxName = 4095;
constexpr size_t kRecordNameMax = GW_CUDA_NAME_MAX - 1;  // longest name a record holds
// User-space addresses on x86-64 (47 bits); anything else is not a pointer into the job.
constexpr uint64_t kMinUserAddr = 0x10000;
constexpr uint64_t kMaxUserAddr = 0x7fffffffffffULL;

bool IsSymbolChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '$' || c == '.';
}

}  // namespace

bool IsKernelSymbol(const std::string& s) {
  if (s.size() < 2 || s.size() > kMaxName) return false;
  if (s[0] >= '0' && s[0] <= '9') return false;
  return std::all_of(s.begin(), s.end(), IsSymbolChar);
}

bool ReadProcessMemory(int32_t pid, uint64_t addr, void* out, size_t n) {
  auto* dst = static_cast<char*>(out);
  while (n > 0) {
    size_t chunk = std::min<uint64_t>(n, kPage - addr % kPage);
    iovec local{dst, chunk};
    iovec remote{reinterpret_cast<void*>(addr), chunk};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(chunk)) {
      return false;
    }
    dst += chunk;
    addr += chunk;
    n -= chunk;
  }
  return true;
}

DriverObjectNames::DriverObjectNames() : read_(ReadProcessMemory) {}

DriverObjectNames::DriverObjectNames(ReadMemory read) : read_(std::move(read)) {}

std::string DriverObjectNames::StringAt(int32_t pid, uint64_t addr) {
  std::string s;
  char buf[kPage];
  while (s.size() <= kMaxName) {
    size_t chunk = kPage - addr % kPage;
    if (!read_(pid, addr, buf, chunk)) return "";
    const char* nul = static_cast<const char*>(std::memchr(buf, '\0', chunk));
    if (nul != nullptr) {
      s.append(buf, static_cast<size_t>(nul - buf));
      return s;
    }
    s.append(buf, chunk);
    addr += chunk;
  }
  return "";  // no terminator within the longest name
}

std::string DriverObjectNames::NameAt(int32_t pid, uint64_t handle, int offset) {
  uint64_t ptr = 0;
  if (!read_(pid, handle + static_cast<uint64_t>(offset), &ptr, sizeof ptr)) return "";
  if (ptr < kMinUserAddr || ptr > kMaxUserAddr) return "";
  std::string s = StringAt(pid, ptr);
  return IsKernelSymbol(s) ? s : "";
}

int DriverObjectNames::offset() const {
  if (confirmed_ >= 0) return confirmed_;
  int best = -1, most = 0;
  for (const auto& [off, n] : votes_) {
    if (n > most) best = off, most = n;
  }
  return best;
}

std::string DriverObjectNames::Read(int32_t pid, uint64_t handle) {
  if (handle < kMinUserAddr || handle > kMaxUserAddr || handle % 8 != 0) return "";
  if (confirmed_ >= 0) return NameAt(pid, handle, confirmed_);
  uint64_t words[kScanWords];
  if (!read_(pid, handle, words, sizeof words)) return "";
  std::vector<std::pair<int, std::string>> found;
  for (int i = 0; i < kScanWords; ++i) {
    if (words[i] < kMinUserAddr || words[i] > kMaxUserAddr) continue;
    std::string s = StringAt(pid, words[i]);
    if (IsKernelSymbol(s)) found.emplace_back(i * 8, std::move(s));
  }
  if (found.empty()) return "";
  bool one_name = std::all_of(found.begin(), found.end(),
                              [&](const auto& f) { return f.second == found[0].second; });
  if (one_name) {  // one string, possibly reached through several words (a copy, a std::string)
    for (const auto& f : found) ++votes_[f.first];
    return found[0].second;
  }
  // Several words point at symbol-like strings: the offset other objects agreed on decides;
  // without one the object is ambiguous and stays unnamed.
  int best = offset();
  for (auto& [off, s] : found) {
    if (off == best) return s;
  }
  return "";
}

void DriverObjectNames::Learn(int32_t pid, uint64_t handle, const std::string& raw_name) {
  if (confirmed_ >= 0 || raw_name.empty()) return;
  for (int i = 0; i < kScanWords; ++i) {
    uint64_t ptr = 0;
    if (!read_(pid, handle + static_cast<uint64_t>(i) * 8, &ptr, sizeof ptr)) return;
    if (ptr < kMinUserAddr || ptr > kMaxUserAddr) continue;
    // Record names are cut at GW_CUDA_NAME_MAX - 1 bytes: a long one matches as a prefix.
    std::string s = StringAt(pid, ptr);
    bool cut = raw_name.size() >= kRecordNameMax;
    if (s == raw_name || (cut && s.compare(0, raw_name.size(), raw_name) == 0)) {
      confirmed_ = i * 8;
      return;
    }
  }
}

}  // namespace gw
