// McpServer: the Model Context Protocol on top of the JSON-RPC layer: lifecycle (initialize
// with protocol-version negotiation, capabilities), tools/list, tools/call, prompts/list,
// prompts/get and ping. It knows nothing about gpuwhy; tools and prompts are registered by
// store_tools.cc / analysis_tools.cc / prompts.cc.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "mcp/json_rpc.h"

namespace gw::mcp {

// Newest first. A client asking for another version gets the newest (the spec's rule).
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                    "2024-11-05"};
inline constexpr const char* kLatestProtocolVersion = kProtocolVersions[0];

// What a tool hands back on success.
struct ToolOutput {
  Json structured = Json::object();  // becomes structuredContent (an object)
  std::string summary;               // one or two lines a person or model reads first
  // The result carries text recorded from traced programs (process, kernel, file names,
  // command lines): the text content says so and fences the data.
  bool untrusted_strings = true;
};

using ToolFn = std::function<StatusOr<ToolOutput>(const Json& arguments)>;

struct ToolSpec {
  std::string name;
  std::string title;
  std::string description;
  Json input_schema;   // a JSON Schema object
  Json output_schema;  // null = none declared
  ToolFn run;
};

struct PromptArgument {
  std::string name;
  std::string description;
  bool required = false;
};

// Returns the prompt's `messages` array.
using PromptFn = std::function<StatusOr<Json>(const std::map<std::string, std::string>& args)>;

struct PromptSpec {
  std::string name;
  std::string title;
  std::string description;
  std::vector<PromptArgument> arguments;
  PromptFn get;
};

struct ServerInfo {
  std::string name = "gpuwhy";
  std::string title = "gpuwhy — why is my GPU job slow";
  std::string version;
  std::string instructions;
};

class McpServer : public RpcHandler {
 public:
  explicit McpServer(ServerInfo info) : info_(std::move(info)) {}

  void AddTool(ToolSpec tool);
  void AddPrompt(PromptSpec prompt);
  // Every tools/call reads the store under this limit (store/reader.h QueryDeadlineScope), so
  // explain or diff on a big file stops with a message instead of holding the server. 0 = none.
  void SetToolTimeLimit(int64_t ms) { tool_time_limit_ms_ = ms; }

  RpcResult HandleRequest(const std::string& method, const Json& params) override;
  void HandleNotification(const std::string& method, const Json& params) override;
  bool BatchesAllowed() const override;

  const std::string& protocol_version() const { return protocol_version_; }
  // What tools/list and prompts/list offer, by name, in order (for --help).
  std::vector<std::string> tool_names() const;
  std::vector<std::string> prompt_names() const;
  bool initialized() const { return initialized_; }

 private:
  RpcResult Initialize(const Json& params);
  RpcResult ListTools() const;
  RpcResult CallTool(const Json& params);
  RpcResult ListPrompts() const;
  RpcResult GetPrompt(const Json& params);
  // Whether the negotiated version has 2025-06-18 features (titles, structured content).
  bool HasStructuredContent() const;

  ServerInfo info_;
  std::vector<ToolSpec> tools_;
  std::vector<PromptSpec> prompts_;
  std::string protocol_version_ = kLatestProtocolVersion;
  bool initialize_seen_ = false;
  bool initialized_ = false;
  int64_t tool_time_limit_ms_ = 0;
};

// Renders a tool's output as MCP text content: the summary, a note when the data holds text
// from traced programs, and the data as JSON in a fenced block. Backticks and angle brackets
// inside the JSON are written as \u escapes, so no recorded string can close the fence or
// imitate markup around it.
std::string RenderToolText(const ToolOutput& output);

}  // namespace gw::mcp
