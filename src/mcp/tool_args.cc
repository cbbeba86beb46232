#include "mcp/tool_args.h"

#include <cmath>
#include <cstdio>

#include "store/reader.h"

namespace gw::mcp {

StatusOr<ToolArgs> ToolArgs::Create(std::string tool, const Json& args,
                                    const std::vector<std::string>& known) {
  if (!args.is_object()) return InvalidArgument(tool + ": arguments must be a JSON object");
  for (const auto& [key, value] : args.items()) {
    bool ok = false;
    for (const std::string& k : known) ok = ok || k == key;
    if (!ok) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      std::string shown = key.size() > 60 ? key.substr(0, 60) + "…" : key;
      return InvalidArgument(tool + ": unknown argument '" + shown +
                             "' (accepted: " + (list.empty() ? "none" : list) + ")");
    }
  }
  return ToolArgs(std::move(tool), &args);
}

Status ToolArgs::Bad(const char* name, const std::string& what) const {
  return InvalidArgument(tool_ + ": argument '" + name + "' " + what);
}

bool ToolArgs::Has(const char* name) const {
  auto it = args_->find(name);
  return it != args_->end() && !it->is_null();
}

Status ToolArgs::Int(const char* name, int64_t min, int64_t max,
                     std::optional<int64_t>* out) const {
  out->reset();
  auto it = args_->find(name);
  if (it == args_->end() || it->is_null()) return Status::Ok();
  int64_t v = 0;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Bad(name, "is out of range");
    }
    v = it->get<int64_t>();
  } else if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9e18) {
      return Bad(name, "must be a whole number");
    }
    v = static_cast<int64_t>(d);
  } else {
    return Bad(name, "must be an integer");
  }
  if (v < min || v > max) {
    return Bad(name, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                         " (got " + std::to_string(v) + ")");
  }
  *out = v;
  return Status::Ok();
}

Status ToolArgs::Number(const char* name, double min, double max,
                        std::optional<double>* out) const {
  out->reset();
  auto it = args_->find(name);
  if (it == args_->end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return Bad(name, "must be a number");
  double v = it->get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "must be between %g and %g", min, max);
    return Bad(name, buf);
  }
  *out = v;
  return Status::Ok();
}

Status ToolArgs::String(const char* name, size_t max_bytes, std::optional<std::string>* out) const {
  out->reset();
  auto it = args_->find(name);
  if (it == args_->end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return Bad(name, "must be a string");
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return Bad(name, "is longer than " + std::to_string(max_bytes) + " bytes");
  }
  *out = s;
  return Status::Ok();
}

Status ToolArgs::StringList(const char* name, size_t max_items, size_t max_bytes,
                            std::vector<std::string>* out) const {
  out->clear();
  auto it = args_->find(name);
  if (it == args_->end() || it->is_null()) return Status::Ok();
  if (it->is_string()) {  // a lone string is a one-element list
    if (it->get_ref<const std::string&>().size() > max_bytes) return Bad(name, "is too long");
    out->push_back(it->get<std::string>());
    return Status::Ok();
  }
  if (!it->is_array()) return Bad(name, "must be an array of strings");
  if (it->size() > max_items) {
    return Bad(name, "may hold at most " + std::to_string(max_items) + " items");
  }
  for (const Json& v : *it) {
    if (!v.is_string()) return Bad(name, "must be an array of strings");
    if (v.get_ref<const std::string&>().size() > max_bytes) return Bad(name, "has a too-long item");
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

Status ToolArgs::Object(const char* name, const Json** out) const {
  *out = nullptr;
  auto it = args_->find(name);
  if (it == args_->end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return Bad(name, "must be an object");
  *out = &*it;
  return Status::Ok();
}

Json WindowToJson(const SessionWindow& w) {
  Json j = Json::object();
  j["session"] = w.session;
  j["label"] = w.label;
  j["from_s"] = w.begin_ns / 1e9;
  j["to_s"] = w.end_ns / 1e9;
  j["first_event_s"] = w.first_ts_ns / 1e9;
  j["last_event_s"] = w.last_ts_ns / 1e9;
  return j;
}

Json WindowSchemaProperties() {
  Json p = Json::object();
  p["session"] = Json{{"type", "integer"},
                      {"minimum", 0},
                      {"description",
                       "Session id (see the sessions tool); 0 or absent = the "
                       "newest session."}};
  p["since_s"] = Json{{"type", "number"},
                      {"exclusiveMinimum", 0},
                      {"description",
                       "Only the last N seconds before to_s, or before the "
                       "session's newest event (timestamp > MAX(timestamp) - N s); "
                       "clipped to the session's start. Excludes from_s."}};
  p["from_s"] = Json{{"type", "number"},
                     {"minimum", 0},
                     {"description",
                      "Window start, seconds since the session started "
                      "(inclusive). Default: to_s - since_s, else the session's "
                      "first event."}};
  p["to_s"] = Json{{"type", "number"},
                   {"minimum", 0},
                   {"description",
                    "Window end, seconds since the session started (exclusive); "
                    "default: the newest event."}};
  return p;
}

StatusOr<WindowRequest> WindowRequestFromArgs(const ToolArgs& args,
                                              std::optional<int64_t> default_since_ns) {
  std::optional<int64_t> session;
  std::optional<double> since_s, from_s, to_s;
  RETURN_IF_ERROR(args.Int("session", 0, INT64_MAX, &session));
  RETURN_IF_ERROR(args.Number("since_s", 1e-9, 1e7, &since_s));
  RETURN_IF_ERROR(args.Number("from_s", 0, 1e7, &from_s));
  RETURN_IF_ERROR(args.Number("to_s", 0, 1e7, &to_s));
  WindowRequest r;
  r.names = {"since_s", "from_s", "to_s", "session"};
  r.session = session.value_or(0);
  if (since_s) r.since_ns = SecondsToNs(*since_s);
  if (from_s) r.from_ns = SecondsToNs(*from_s);
  if (to_s) r.to_ns = SecondsToNs(*to_s);
  r.default_since_ns = default_since_ns;
  RETURN_IF_ERROR(ValidateWindowRequest(r));
  return r;
}

StatusOr<SessionWindow> ResolveToolWindow(StoreReader& reader, const ToolArgs& args) {
  ASSIGN_OR_RETURN(WindowRequest request, WindowRequestFromArgs(args, std::nullopt));
  return ResolveWindow(reader, request);
}

}  // namespace gw::mcp
