// What `gpuwhy check` found, as a value: the CLI prints it as text or JSON, the MCP `check`
// tool returns the same JSON. No BPF and no probing here (that is checks.h), so the MCP
// server can render a report without linking the sources.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace gw {

enum class CheckState { kPass, kFail, kInfo };
const char* CheckStateName(CheckState s);  // "pass" | "fail" | "info"

struct CheckResult {
  std::string name;  // "BTF", "libcudart", …
  CheckState state = CheckState::kPass;
  bool required = false;  // a failure means trace cannot run
  std::string detail;
  std::string hint;
};

struct CheckReport {
  std::vector<CheckResult> checks;
  // No required check failed: `gpuwhy trace` can run here.
  bool CanTrace() const;
};

// {"can_trace": bool, "checks": [{"name", "state", "required", "detail", "hint"}, …]}, in that
// key order: `gpuwhy check --json` and the MCP tool's structuredContent.
nlohmann::ordered_json CheckReportToJson(const CheckReport& report);
// The inverse, for a report that crossed a process boundary (the MCP server runs the checks in
// a child); an error when `json` is not a report.
StatusOr<CheckReport> CheckReportFromJson(const nlohmann::json& json);

// The lines `gpuwhy check` prints: ✓/✗/· per check, hints of the ones that did not pass, and
// the verdict.
std::string CheckReportToText(const CheckReport& report);

}  // namespace gw
