// JSON-RPC 2.0 message handling for the MCP server, independent of the transport.
//
// HandleMessage() takes one framed message (one stdio line, or one HTTP body), validates it as
// a JSON-RPC request, notification, response or (when the handler allows) batch, dispatches it
// and returns the serialized reply, or an empty string when none is due. Nothing thrown by
// nlohmann::json or a handler escapes: a malformed or hostile message gets an error reply and
// the caller keeps serving.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gw::mcp {

using Json = nlohmann::json;

// The error codes JSON-RPC 2.0 defines (and MCP uses).
enum class RpcErrorCode : int {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
};

struct RpcError {
  RpcErrorCode code = RpcErrorCode::kInternalError;
  std::string message;
  Json data;  // omitted from the reply when null
};

// A method's outcome: the `result` object, or an error.
using RpcResult = std::variant<Json, RpcError>;

class RpcHandler {
 public:
  virtual ~RpcHandler() = default;
  // A request (it has an id). `params` is an object, an array, or null when absent.
  virtual RpcResult HandleRequest(const std::string& method, const Json& params) = 0;
  // A notification (no id): never answered, whatever happens.
  virtual void HandleNotification(const std::string& method, const Json& params) = 0;
  // Whether a JSON array of messages (a batch) is accepted right now.
  virtual bool BatchesAllowed() const { return false; }
};

// Messages nested deeper than this are refused before parsing (deep nesting is an attack on
// recursive code, not something MCP needs).
inline constexpr int kMaxNestingDepth = 64;

// Lets a transport cancel requests (MCP notifications/cancelled). HandleMessage calls Begin
// before it dispatches each request (not notifications) and End after: a request Begin refuses
// is neither run nor answered, and the reply of one whose End returns false is dropped.
class RequestHooks {
 public:
  virtual ~RequestHooks() = default;
  virtual bool Begin(const Json& id, const std::string& method) = 0;
  virtual bool End() = 0;
};

// Replies echo every id as the client wrote it (numbers in the same spelling, strings with the
// same escapes), in batches as in single messages.
std::string HandleMessage(RpcHandler& handler, std::string_view message,
                          RequestHooks* hooks = nullptr);

inline constexpr const char* kCancelledMethod = "notifications/cancelled";

// The requestIds named by notifications/cancelled in a message: the one notification, or those
// in a batch. Empty for anything else, including malformed cancellations (ignored, as the spec
// says). `*only_cancellation` is set when the message is a single well-formed cancellation.
std::vector<Json> CancelledRequestIds(std::string_view message, bool* only_cancellation);

// Serializes with invalid UTF-8 replaced (strings read from traces are not guaranteed UTF-8),
// never throwing.
std::string SerializeJson(const Json& value);
std::string ErrorReply(const Json& id, const RpcError& error);

// The deepest [ / { nesting of a JSON text, ignoring brackets inside strings.
int NestingDepth(std::string_view text);

}  // namespace gw::mcp
