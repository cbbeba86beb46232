#include "mcp/tool_args.h"

#include <cmath>
#include <cstdio>

#include "store/reader.h"

namespace gw::mcp {

namespace {

std::string FormatSeconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

int64_t SecondsToNs(double s) { return static_cast<int64_t>(std::llround(s * 1e9)); }

}  // namespace

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

Json TimeWindow::ToJson() const {
  Json j = Json::object();
  j["session"] = session;
  j["label"] = label;
  j["from_s"] = lo_ns / 1e9;
  j["to_s"] = hi_ns / 1e9;
  j["first_event_s"] = first_ts_ns / 1e9;
  j["last_event_s"] = last_ts_ns / 1e9;
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
                       "Only the last N seconds before the session's newest "
                       "event (timestamp > MAX(timestamp) - N s). Excludes "
                       "from_s/to_s."}};
  p["from_s"] = Json{{"type", "number"},
                     {"minimum", 0},
                     {"description",
                      "Window start, seconds since the session started "
                      "(inclusive)."}};
  p["to_s"] = Json{{"type", "number"},
                   {"minimum", 0},
                   {"description",
                    "Window end, seconds since the session started (exclusive); "
                    "default: the newest event."}};
  return p;
}

StatusOr<int64_t> ResolveSession(StoreReader& reader, std::optional<int64_t> requested) {
  if (!requested || *requested == 0) return reader.LatestSession();
  ASSIGN_OR_RETURN(Table t, reader.QueryWith("SELECT COUNT(*) FROM sessions WHERE id = ?1",
                                             {*requested}, QueryOptions{1, 5000}));
  if (t.rows.empty() || std::get<int64_t>(t.rows[0][0]) == 0) {
    ASSIGN_OR_RETURN(Table ids, reader.Query("SELECT group_concat(id, ', ') FROM sessions",
                                             QueryOptions{1, 5000}));
    std::string list;
    if (!ids.rows.empty()) list = CellToText(ids.rows[0][0], false);
    return NotFound("session " + std::to_string(*requested) + " is not in " + reader.path() +
                    " (sessions: " + (list.empty() ? "none" : list) + ")");
  }
  return *requested;
}

StatusOr<TimeWindow> ResolveWindow(StoreReader& reader, const ToolArgs& args) {
  std::optional<int64_t> session_arg;
  RETURN_IF_ERROR(args.Int("session", 0, INT64_MAX, &session_arg));
  TimeWindow w;
  RETURN_IF_ERROR(args.Number("since_s", 1e-9, 1e7, &w.since_s));
  RETURN_IF_ERROR(args.Number("from_s", 0, 1e7, &w.from_s));
  RETURN_IF_ERROR(args.Number("to_s", 0, 1e7, &w.to_s));
  if (w.since_s && (w.from_s || w.to_s)) {
    return InvalidArgument("give either since_s or from_s/to_s, not both");
  }
  if (w.from_s && w.to_s && *w.to_s <= *w.from_s) {
    return InvalidArgument("to_s must be greater than from_s");
  }
  ASSIGN_OR_RETURN(w.session, ResolveSession(reader, session_arg));
  ASSIGN_OR_RETURN(Table b, reader.QueryWith("SELECT MIN(ts), MAX(ts) FROM event_rows WHERE "
                                             "session = ?1",
                                             {w.session}, QueryOptions{1, 10000}));
  if (!b.rows.empty() && std::holds_alternative<int64_t>(b.rows[0][0])) {
    w.first_ts_ns = std::get<int64_t>(b.rows[0][0]);
    w.last_ts_ns = std::get<int64_t>(b.rows[0][1]);
  }
  if (w.since_s) {
    w.lo_ns = w.last_ts_ns - SecondsToNs(*w.since_s) + 1;  // timestamp > last - since
    w.hi_ns = w.last_ts_ns;
    char buf[64];
    std::snprintf(buf, sizeof buf, "last %g s", *w.since_s);
    w.label = buf;
  } else if (w.from_s || w.to_s) {
    w.lo_ns = w.from_s ? SecondsToNs(*w.from_s) : 0;
    w.hi_ns = w.to_s ? SecondsToNs(*w.to_s) - 1 : w.last_ts_ns;  // to is exclusive
    w.label = FormatSeconds(w.lo_ns / 1e9) + " – " +
              (w.to_s ? FormatSeconds(*w.to_s) : std::string("end"));
  } else {
    w.lo_ns = w.first_ts_ns < 0 ? w.first_ts_ns : 0;
    w.hi_ns = w.last_ts_ns;
    w.label = "whole session";
  }
  return w;
}

}  // namespace gw::mcp
