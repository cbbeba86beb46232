#include "demo/scenarios.h"

namespace gw {

const std::vector<ScenarioInfo>& AllScenarios() {
  static const std::vector<ScenarioInfo> kScenarios = {
      {"cpu-contention",
       "a transcode job and busy agents preempt the trainer and its DataLoader workers",
       "cpu-contention"},
      {"memcpy-bottleneck", "large host-to-device copies from pageable memory dominate each step",
       "memcpy-bottleneck"},
      {"dataloader-starvation",
       "two DataLoader workers with heavy augmentation cannot keep up with the GPU",
       "dataloader-starvation"},
      {"io-bottleneck", "workers read a cold dataset from a slow disk (page-cache misses)",
       "io-bottleneck"},
      {"memory-pressure",
       "another process fills RAM: major faults, reclaim and swap stall the feeders",
       "memory-pressure"},
      {"periodic-spike", "torch.cuda.empty_cache() every 10 s: allocator storms stall steps",
       "allocator-spikes"},
      {"cold-start", "context creation and module loading delay the first useful GPU work",
       "cold-start"},
      {"gpu-contention", "an evaluation job shares the GPU with the trainer", "gpu-sharing"},
      {"healthy", "a well-fed training loop: nothing above LOW", ""},
  };
  return kScenarios;
}

const ScenarioInfo* FindScenario(std::string_view name) {
  for (const ScenarioInfo& s : AllScenarios()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace gw
