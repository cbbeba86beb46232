// The synthetic scenarios `gpuwhy demo` records: what each one injects and which finding
// explain must put on top.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gw {

struct ScenarioInfo {
  std::string name;           // "cpu-contention"
  std::string summary;        // one line for `gpuwhy demo`
  std::string expected_rule;  // the top finding's rule id; "" for healthy
};

const std::vector<ScenarioInfo>& AllScenarios();
const ScenarioInfo* FindScenario(std::string_view name);

}  // namespace gw
