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
#include "store/window.h"

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

// The window arguments every range-taking tool accepts.
inline const std::vector<std::string>& WindowArgNames() {
  static const std::vector<std::string> kNames = {"session", "since_s", "from_s", "to_s"};
  return kNames;
}
// Their JSON-schema properties, merged into a tool's input schema.
Json WindowSchemaProperties();

// The window arguments as a request for the shared window rule (store/window.h): session
// (0/absent = newest), since_s (the last N s before to_s, default the newest event: the brief's
// `timestamp > MAX(timestamp) - N`), from_s/to_s (seconds since the session started, [from,
// to)). `default_since_ns` applies when neither since_s nor from_s is given; absent = the whole
// session.
StatusOr<WindowRequest> WindowRequestFromArgs(const ToolArgs& args,
                                              std::optional<int64_t> default_since_ns);
// WindowRequestFromArgs with no default, resolved on `reader`: the range the data tools read.
StatusOr<SessionWindow> ResolveToolWindow(StoreReader& reader, const ToolArgs& args);
// The window as tools report it: session, label, from_s/to_s ([from, to)), first/last event.
Json WindowToJson(const SessionWindow& window);

}  // namespace gw::mcp
