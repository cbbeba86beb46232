#include "check/check_report.h"

#include <cstdio>

namespace gw {

const char* CheckStateName(CheckState s) {
  switch (s) {
    case CheckState::kPass:
      return "pass";
    case CheckState::kFail:
      return "fail";
    case CheckState::kInfo:
      return "info";
  }
  return "info";
}

bool CheckReport::CanTrace() const {
  for (const CheckResult& r : checks) {
    if (r.required && r.state == CheckState::kFail) return false;
  }
  return true;
}

nlohmann::ordered_json CheckReportToJson(const CheckReport& report) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const CheckResult& r : report.checks) {
    checks.push_back({{"name", r.name},
                      {"state", CheckStateName(r.state)},
                      {"required", r.required},
                      {"detail", r.detail},
                      {"hint", r.hint}});
  }
  return {{"can_trace", report.CanTrace()}, {"checks", std::move(checks)}};
}

StatusOr<CheckReport> CheckReportFromJson(const nlohmann::json& json) {
  auto bad = [] { return Internal("check: the checks' report is not a gpuwhy check report"); };
  if (!json.is_object() || !json.contains("checks") || !json["checks"].is_array()) return bad();
  CheckReport report;
  for (const nlohmann::json& c : json["checks"]) {
    if (!c.is_object()) return bad();
    CheckResult r;
    try {
      r.name = c.at("name").get<std::string>();
      std::string state = c.at("state").get<std::string>();
      r.required = c.at("required").get<bool>();
      r.detail = c.at("detail").get<std::string>();
      r.hint = c.at("hint").get<std::string>();
      if (state == "pass") {
        r.state = CheckState::kPass;
      } else if (state == "fail") {
        r.state = CheckState::kFail;
      } else if (state == "info") {
        r.state = CheckState::kInfo;
      } else {
        return bad();
      }
    } catch (const nlohmann::json::exception&) {
      return bad();
    }
    report.checks.push_back(std::move(r));
  }
  return report;
}

std::string CheckReportToText(const CheckReport& report) {
  std::string out;
  char line[4096];
  for (const CheckResult& r : report.checks) {
    const char* mark = r.state == CheckState::kPass   ? "✓"
                       : r.state == CheckState::kFail ? "✗"
                                                      : "·";
    // %-13s pads by bytes, as the printf this replaced did; long details are appended whole.
    std::snprintf(line, sizeof line, "%s %-13s ", mark, r.name.c_str());
    out += line + r.detail + "\n";
    if (!r.hint.empty() && r.state != CheckState::kPass) {
      std::snprintf(line, sizeof line, "  %-13s hint: ", "");
      out += line + r.hint + "\n";
    }
  }
  out += report.CanTrace() ? "\ngpuwhy trace can run on this machine.\n"
                           : "\ngpuwhy trace cannot run here yet: fix the ✗ lines above.\n";
  return out;
}

}  // namespace gw
