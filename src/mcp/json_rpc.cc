#include "mcp/json_rpc.h"

#include <cstring>
#include <exception>
#include <new>
#include <optional>

namespace gw::mcp {

namespace {

bool IsValidId(const Json& id) {
  // MCP: a string or a number, never null. JSON-RPC discourages fractions; accept them anyway.
  return id.is_string() || id.is_number();
}

Json ReplyEnvelope(const Json& id) {
  Json reply = Json::object();
  reply["jsonrpc"] = "2.0";
  reply["id"] = id;
  return reply;
}

Json ErrorObject(const Json& id, const RpcError& error) {
  Json reply = ReplyEnvelope(id);
  Json err = Json::object();
  err["code"] = static_cast<int>(error.code);
  err["message"] = error.message;
  if (!error.data.is_null()) err["data"] = error.data;
  reply["error"] = std::move(err);
  return reply;
}

RpcError InvalidRequest(std::string message) {
  return RpcError{RpcErrorCode::kInvalidRequest, std::move(message), nullptr};
}

// Runs one request: its reply (result or error), whatever the handler does.
Json Dispatch(RpcHandler& handler, const std::string& method, const Json& params, const Json& id) {
  RpcResult result;
  try {
    result = handler.HandleRequest(method, params);
  } catch (const std::bad_alloc&) {
    return ErrorObject(id, RpcError{RpcErrorCode::kInternalError,
                                    "internal error: out of memory handling " + method, nullptr});
  } catch (const std::exception& e) {
    return ErrorObject(id,
                       RpcError{RpcErrorCode::kInternalError,
                                "internal error handling " + method + ": " + e.what(), nullptr});
  } catch (...) {
    return ErrorObject(
        id, RpcError{RpcErrorCode::kInternalError, "internal error handling " + method, nullptr});
  }
  if (const RpcError* err = std::get_if<RpcError>(&result)) return ErrorObject(id, *err);
  Json reply = ReplyEnvelope(id);
  reply["result"] = std::move(std::get<Json>(result));
  return reply;
}

// Handles one parsed message that is not a batch. Returns a null Json when no reply is due.
Json HandleOne(RpcHandler& handler, const Json& msg, RequestHooks* hooks) {
  if (!msg.is_object()) {
    return ErrorObject(nullptr, InvalidRequest("invalid request: a JSON-RPC message must be a "
                                               "JSON object"));
  }
  auto id_it = msg.find("id");
  const bool has_id = id_it != msg.end();
  const Json id = (has_id && IsValidId(*id_it)) ? *id_it : Json(nullptr);

  auto version = msg.find("jsonrpc");
  if (version == msg.end() || !version->is_string() ||
      version->get_ref<const std::string&>() != "2.0") {
    return ErrorObject(id, InvalidRequest("invalid request: \"jsonrpc\" must be \"2.0\""));
  }
  auto method_it = msg.find("method");
  if (method_it == msg.end()) {
    // A response to a request of ours (we send none) or junk. Responses are not answered.
    if (has_id && (msg.contains("result") || msg.contains("error"))) return nullptr;
    return ErrorObject(id, InvalidRequest("invalid request: no \"method\""));
  }
  if (!method_it->is_string()) {
    return ErrorObject(id, InvalidRequest("invalid request: \"method\" must be a string"));
  }
  const std::string& method = method_it->get_ref<const std::string&>();
  static const Json kNoParams = nullptr;
  const Json* params = &kNoParams;
  auto params_it = msg.find("params");
  if (params_it != msg.end()) {
    if (!params_it->is_object() && !params_it->is_array()) {
      return has_id ? ErrorObject(id, InvalidRequest("invalid request: \"params\" must be an "
                                                     "object"))
                    : Json(nullptr);
    }
    params = &*params_it;
  }
  if (!has_id) {
    try {
      handler.HandleNotification(method, *params);
    } catch (...) {
      // Notifications are never answered, not even with an error.
    }
    return nullptr;
  }
  if (!IsValidId(*id_it)) {
    return ErrorObject(nullptr, InvalidRequest("invalid request: \"id\" must be a string or a "
                                               "number"));
  }
  if (hooks != nullptr && !hooks->Begin(*id_it, method)) return nullptr;  // cancelled, unrun
  Json reply = Dispatch(handler, method, *params, id);
  if (hooks != nullptr && !hooks->End()) return nullptr;  // cancelled while it ran
  return reply;
}

}  // namespace

int NestingDepth(std::string_view text) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) max_depth = depth;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return max_depth;
}

std::string SerializeJson(const Json& value) {
  try {
    return value.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (...) {
    // Only reachable on allocation failure; keep the channel well-formed.
    return R"({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error: )"
           R"(could not serialize the reply"}})";
  }
}

namespace {

size_t SkipSpace(std::string_view m, size_t j) {
  while (j < m.size() && (m[j] == ' ' || m[j] == '\t' || m[j] == '\r' || m[j] == '\n')) ++j;
  return j;
}

// The end of the string token that starts at m[i] == '"' (one past its closing quote).
size_t StringEnd(std::string_view m, size_t i) {
  ++i;
  while (i < m.size() && m[i] != '"') i += m[i] == '\\' ? 2 : 1;
  return i < m.size() ? i + 1 : m.size();
}

// The text of an object's own "id" value as the client wrote it, when it is a number or a
// string: a parse/dump round trip reformats numbers (1.2e29 came back as
// 1.2000000000000001e+29) and string escapes, and JSON-RPC says the reply carries the same id.
// `m` is one JSON object that parsed. The last "id" member counts, as in nlohmann's parser.
std::optional<std::string_view> RawId(std::string_view m) {
  std::optional<std::string_view> found;
  int depth = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    char c = m[i];
    if (c == '"') {
      size_t start = i;
      size_t end = StringEnd(m, i);
      i = end - 1;
      if (depth != 1) continue;
      size_t j = SkipSpace(m, end);
      if (j >= m.size() || m[j] != ':') continue;  // a value, not a key
      if (m.substr(start, end - start) != "\"id\"") continue;
      j = SkipSpace(m, j + 1);
      size_t k = j;
      if (j < m.size() && m[j] == '"') {
        k = StringEnd(m, j);
      } else {
        while (k < m.size() && std::strchr("+-0123456789.eE", m[k]) != nullptr && m[k] != '\0') {
          ++k;
        }
      }
      found = k > j ? std::optional<std::string_view>(m.substr(j, k - j)) : std::nullopt;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
  }
  return found;
}

// The texts of the elements of a JSON array that parsed, in order.
std::vector<std::string_view> ArrayElements(std::string_view m) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    char c = m[i];
    if (c == '"') {
      i = StringEnd(m, i) - 1;
      continue;
    }
    if (c == '[' || c == '{') {
      if (++depth == 1) start = i + 1;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) {
        std::string_view e = m.substr(start, i - start);
        if (e.find_first_not_of(" \t\r\n") != std::string_view::npos) out.push_back(e);
        break;
      }
    } else if (c == ',' && depth == 1) {
      out.push_back(m.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// The reply with its id spliced in as the client's text `message` has it (only when that text
// parses to the same id: a number, or a string with the same characters).
std::string SerializeWithRawId(Json reply, std::string_view message) {
  auto it = reply.find("id");
  if (it != reply.end() && (it->is_number() || it->is_string())) {
    std::optional<std::string_view> raw = RawId(message);
    if (raw) {
      Json reparsed = Json::parse(*raw, nullptr, /*allow_exceptions=*/false);
      if (!reparsed.is_discarded() && reparsed.type() == it->type() && reparsed == *it) {
        reply.erase("id");
        std::string body = SerializeJson(reply);  // {"error":…} or {"jsonrpc":…}
        return "{\"id\":" + std::string(*raw) + "," + body.substr(1);
      }
    }
  }
  return SerializeJson(reply);
}

}  // namespace

std::string ErrorReply(const Json& id, const RpcError& error) {
  return SerializeJson(ErrorObject(id, error));
}

std::string HandleMessage(RpcHandler& handler, std::string_view message, RequestHooks* hooks) {
  try {
    if (NestingDepth(message) > kMaxNestingDepth) {
      return ErrorReply(nullptr, InvalidRequest("invalid request: JSON nested deeper than " +
                                                std::to_string(kMaxNestingDepth) + " levels"));
    }
    Json msg = Json::parse(message, nullptr, /*allow_exceptions=*/false);
    if (msg.is_discarded()) {
      // Re-parse with exceptions only to get the position and reason for the user.
      std::string why = "the message is not valid JSON";
      try {
        Json unused = Json::parse(message);
        (void)unused;
      } catch (const Json::parse_error& e) {
        why = e.what();
        // The library quotes the token it stopped at, which may be most of the message.
        if (why.size() > 240) why = why.substr(0, 240) + "…";
      }
      return ErrorReply(nullptr,
                        RpcError{RpcErrorCode::kParseError, "parse error: " + why, nullptr});
    }
    if (msg.is_array()) {
      if (!handler.BatchesAllowed()) {
        return ErrorReply(nullptr, InvalidRequest("invalid request: JSON-RPC batches are not "
                                                  "supported by the negotiated MCP version; "
                                                  "send one message per line"));
      }
      if (msg.empty()) return ErrorReply(nullptr, InvalidRequest("invalid request: empty batch"));
      // Each element's reply goes through the single-message path with that element's text,
      // so its id is echoed as written.
      std::vector<std::string_view> texts = ArrayElements(message);
      if (texts.size() != msg.size()) texts.assign(msg.size(), std::string_view());
      std::string replies;
      for (size_t i = 0; i < msg.size(); ++i) {
        const Json& item = msg[i];
        Json reply = item.is_array() ? ErrorObject(nullptr, InvalidRequest("invalid request: "
                                                                           "nested batch"))
                                     : HandleOne(handler, item, hooks);
        if (reply.is_null()) continue;
        replies += replies.empty() ? "[" : ",";
        replies += SerializeWithRawId(std::move(reply), texts[i]);
      }
      return replies.empty() ? std::string() : replies + "]";
    }
    Json reply = HandleOne(handler, msg, hooks);
    return reply.is_null() ? std::string() : SerializeWithRawId(std::move(reply), message);
  } catch (const std::exception& e) {
    return ErrorReply(nullptr, RpcError{RpcErrorCode::kInternalError,
                                        std::string("internal error: ") + e.what(), nullptr});
  } catch (...) {
    return ErrorReply(nullptr, RpcError{RpcErrorCode::kInternalError, "internal error", nullptr});
  }
}

namespace {

// The requestId of one message when it is a well-formed notifications/cancelled.
std::optional<Json> CancelledId(const Json& msg) {
  if (!msg.is_object() || msg.contains("id")) return std::nullopt;
  auto version = msg.find("jsonrpc");
  auto method = msg.find("method");
  auto params = msg.find("params");
  if (version == msg.end() || *version != "2.0" || method == msg.end() ||
      *method != kCancelledMethod || params == msg.end() || !params->is_object()) {
    return std::nullopt;
  }
  auto id = params->find("requestId");
  if (id == params->end() || !IsValidId(*id)) return std::nullopt;
  return *id;
}

}  // namespace

std::vector<Json> CancelledRequestIds(std::string_view message, bool* only_cancellation) {
  *only_cancellation = false;
  std::vector<Json> ids;
  // Cheap test first: the reader thread calls this for every line.
  if (message.find(kCancelledMethod) == std::string_view::npos) return ids;
  if (NestingDepth(message) > kMaxNestingDepth) return ids;
  try {
    Json msg = Json::parse(message, nullptr, /*allow_exceptions=*/false);
    if (msg.is_array()) {
      for (const Json& item : msg) {
        if (std::optional<Json> id = CancelledId(item)) ids.push_back(std::move(*id));
      }
    } else if (std::optional<Json> id = CancelledId(msg)) {
      ids.push_back(std::move(*id));
      *only_cancellation = true;
    }
  } catch (...) {
    ids.clear();  // only allocation failure; a cancellation is best effort
    *only_cancellation = false;
  }
  return ids;
}

}  // namespace gw::mcp
