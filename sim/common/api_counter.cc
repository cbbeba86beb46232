#include "common/api_counter.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gwsim {
namespace {

std::atomic<ApiCounter*> g_head{nullptr};
const char* g_library = nullptr;

void Dump() {
  const char* dir = getenv("GWSIM_CALL_COUNTS_DIR");
  if (dir == nullptr || *dir == '\0' || g_library == nullptr) return;
  std::string path =
      std::string(dir) + "/" + g_library + "." + std::to_string(getpid()) + ".counts";
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return;
  for (ApiCounter* c = g_head.load(std::memory_order_acquire); c != nullptr; c = c->next()) {
    fprintf(f, "%s %llu\n", c->name(), static_cast<unsigned long long>(c->count()));
  }
  fclose(f);
}

}  // namespace

void ApiCounter::Hit() {
  count_.fetch_add(1, std::memory_order_relaxed);
  if (linked_.load(std::memory_order_acquire)) return;
  if (linked_.exchange(true, std::memory_order_acq_rel)) return;
  ApiCounter* head = g_head.load(std::memory_order_relaxed);
  do {
    next_ = head;
  } while (!g_head.compare_exchange_weak(head, this, std::memory_order_release,
                                         std::memory_order_relaxed));
}

uint64_t CallCount(const char* name) {
  if (name == nullptr) return 0;
  for (ApiCounter* c = g_head.load(std::memory_order_acquire); c != nullptr; c = c->next()) {
    if (strcmp(c->name(), name) == 0) return c->count();
  }
  return 0;
}

void DumpCountsAtExit(const char* library) {
  g_library = library;
  atexit(Dump);
}

}  // namespace gwsim
