// Validated access to a tool's `arguments` object, and the time window most tools share.
//
// Bad arguments come back as kInvalidArgument statuses, which the server turns into tool
// execution errors (isError) the model can read and correct.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "mcp/json_rpc.h"

namespace gw {
class StoreReader;
}

namespace gw::mcp {

class ToolArgs {
 public:
  // Refuses keys outside `known`: a misspelt filter must not silently widen a query.
  static StatusOr<ToolArgs> Create(std::string tool, const Json& args,
                                   const std::vector<std::string>& known);

  bool Has(const char* name) const;
  // Integers; a float with an integral value (120.0) is accepted.
  Status Int(const char* name, int64_t min, int64_t max, std::optional<int64_t>* out) const;
  Status Number(const char* name, double min, double max, std::optional<double>* out) const;
  Status String(const char* name, size_t max_bytes, std::optional<std::string>* out) const;
  Status StringList(const char* name, size_t max_items, size_t max_bytes,
                    std::vector<std::string>* out) const;
  // An object argument (for nested arguments such as diff's sides); null when absent.
  Status Object(const char* name, const Json** out) const;

 private:
  ToolArgs(std::string tool, const Json* args) : tool_(std::move(tool)), args_(args) {}
  Status Bad(const char* name, const std::string& what) const;

  std::string tool_;
  const Json* args_;
};

// A window of one session, as an inclusive range of session timestamps (ns since its start).
struct TimeWindow {
  int64_t session = 0;
  int64_t lo_ns = 0;
  int64_t hi_ns = 0;
  int64_t first_ts_ns = 0;  // the session's first and last event
  int64_t last_ts_ns = 0;
  std::string label;  // "last 120 s", "whole session", "10.000 s – 40.000 s"
  // The arguments that chose it (for explain, which resolves its own window).
  std::optional<double> since_s, from_s, to_s;

  Json ToJson() const;
};

// The window arguments every range-taking tool accepts.
inline const std::vector<std::string>& WindowArgNames() {
  static const std::vector<std::string> kNames = {"session", "since_s", "from_s", "to_s"};
  return kNames;
}
// Their JSON-schema properties, merged into a tool's input schema.
Json WindowSchemaProperties();

// session: 0/absent = newest. since_s: events with timestamp > last − since (the brief's
// `timestamp > MAX(timestamp) - N`). from_s/to_s: from ≤ timestamp < to. Neither: whole session.
StatusOr<TimeWindow> ResolveWindow(StoreReader& reader, const ToolArgs& args);

// Resolves the session argument alone (0/absent = newest); NotFound lists the sessions there are.
StatusOr<int64_t> ResolveSession(StoreReader& reader, std::optional<int64_t> requested);

}  // namespace gw::mcp
