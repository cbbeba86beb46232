// Per-entry-point call counters of one sim library: the ground truth a tracer's counts can be
// compared with. Every exported CUDA function starts with GWSIM_API_ENTRY("name"), which also
// keeps each entry point a non-leaf function so it gets the `push %rbp; mov %rsp,%rbp`
// prologue of the real libraries (a leaf would be compiled without a frame).
#ifndef GWSIM_COMMON_API_COUNTER_H_
#define GWSIM_COMMON_API_COUNTER_H_

#include <atomic>
#include <cstdint>

namespace gwsim {

class ApiCounter {
 public:
  constexpr explicit ApiCounter(const char* name) : name_(name) {}
  // Counts one call (and links the counter into the library's list on its first call).
  __attribute__((noinline)) void Hit();

  const char* name() const { return name_; }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  ApiCounter* next() const { return next_; }

 private:
  const char* name_;
  std::atomic<uint64_t> count_{0};
  std::atomic<bool> linked_{false};
  ApiCounter* next_ = nullptr;
};

// Calls counted so far for `name` in this library (0 if never called).
uint64_t CallCount(const char* name);

// Writes "<name> <count>" lines to <dir>/<library>.<pid>.counts at exit when
// GWSIM_CALL_COUNTS_DIR is set. Registered once per library.
void DumpCountsAtExit(const char* library);

}  // namespace gwsim

#define GWSIM_API_ENTRY(name)                          \
  static ::gwsim::ApiCounter gwsim_api_counter_(name); \
  gwsim_api_counter_.Hit()

#endif  // GWSIM_COMMON_API_COUNTER_H_
