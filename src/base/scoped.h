// ScopedResource: one move-only RAII owner for every fd, bpf_link*, ring_buffer*, skeleton,
// sqlite3* and sqlite3_stmt* in gpuwhy. No naked close/destroy calls elsewhere.
#pragma once

#include <unistd.h>

#include <utility>

namespace gw {

template <typename T, auto kRelease, T kInvalid = T{}>
class ScopedResource {
 public:
  ScopedResource() = default;
  explicit ScopedResource(T value) : value_(value) {}
  ~ScopedResource() { Reset(); }
  ScopedResource(ScopedResource&& other) noexcept : value_(other.Release()) {}
  ScopedResource& operator=(ScopedResource&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  ScopedResource(const ScopedResource&) = delete;
  ScopedResource& operator=(const ScopedResource&) = delete;

  T get() const { return value_; }
  explicit operator bool() const { return value_ != kInvalid; }
  T Release() { return std::exchange(value_, kInvalid); }
  void Reset(T value = kInvalid) {
    T old = std::exchange(value_, value);
    if (old != kInvalid) kRelease(old);
  }

 private:
  T value_ = kInvalid;
};

inline void CloseFd(int fd) { ::close(fd); }
using ScopedFd = ScopedResource<int, CloseFd, -1>;

}  // namespace gw
