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

// Handles one parsed message that is not a batch. Returns a null Json when no reply is due.
Json HandleOne(RpcHandler& handler, const Json& msg) {
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
  RpcResult result;
  try {
    result = handler.HandleRequest(method, *params);
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

// The text of a top-level object's "id" when it is a number, as the client wrote it: a
// parse/dump round trip reformats numbers (1.2e29 came back as 1.2000000000000001e+29), and
// JSON-RPC says the reply carries the same id.
std::optional<std::string> RawNumericId(std::string_view m) {
  int depth = 0;
  auto skip_ws = [&](size_t j) {
    while (j < m.size() && (m[j] == ' ' || m[j] == '\t' || m[j] == '\r' || m[j] == '\n')) ++j;
    return j;
  };
  for (size_t i = 0; i < m.size(); ++i) {
    char c = m[i];
    if (c == '"') {
      size_t start = i++;
      while (i < m.size() && m[i] != '"') i += m[i] == '\\' ? 2 : 1;
      if (i >= m.size()) return std::nullopt;
      if (depth != 1) continue;
      size_t j = skip_ws(i + 1);
      if (j >= m.size() || m[j] != ':') continue;  // a value, not a key
      if (m.substr(start + 1, i - start - 1) != "id") continue;
      j = skip_ws(j + 1);
      size_t k = j;
      while (k < m.size() && std::strchr("+-0123456789.eE", m[k]) != nullptr && m[k] != '\0') ++k;
      if (k == j) return std::nullopt;
      return std::string(m.substr(j, k - j));
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
  }
  return std::nullopt;
}

// The reply with its numeric id spliced in as the client's text (only when that text parses to
// the same number, and holds nothing but number characters).
std::string SerializeWithRawId(Json reply, std::string_view message) {
  auto it = reply.find("id");
  if (it != reply.end() && it->is_number()) {
    std::optional<std::string> raw = RawNumericId(message);
    if (raw) {
      Json reparsed = Json::parse(*raw, nullptr, /*allow_exceptions=*/false);
      if (!reparsed.is_discarded() && reparsed == *it) {
        reply.erase("id");
        std::string body = SerializeJson(reply);  // {"error":…} or {"jsonrpc":…}
        return "{\"id\":" + *raw + "," + body.substr(1);
      }
    }
  }
  return SerializeJson(reply);
}

}  // namespace

std::string ErrorReply(const Json& id, const RpcError& error) {
  return SerializeJson(ErrorObject(id, error));
}

std::string HandleMessage(RpcHandler& handler, std::string_view message) {
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
      Json replies = Json::array();
      for (const Json& item : msg) {
        Json reply = item.is_array() ? ErrorObject(nullptr, InvalidRequest("invalid request: "
                                                                           "nested batch"))
                                     : HandleOne(handler, item);
        if (!reply.is_null()) replies.push_back(std::move(reply));
      }
      return replies.empty() ? std::string() : SerializeJson(replies);
    }
    Json reply = HandleOne(handler, msg);
    return reply.is_null() ? std::string() : SerializeWithRawId(std::move(reply), message);
  } catch (const std::exception& e) {
    return ErrorReply(nullptr, RpcError{RpcErrorCode::kInternalError,
                                        std::string("internal error: ") + e.what(), nullptr});
  } catch (...) {
    return ErrorReply(nullptr, RpcError{RpcErrorCode::kInternalError, "internal error", nullptr});
  }
}

}  // namespace gw::mcp
