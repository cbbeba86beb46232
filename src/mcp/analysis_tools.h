// The tools backed by src/analysis: `explain` (causal chains and GPU feed-time attribution for a
// window) and `diff` (before/after between two sessions or files). In a build without the
// analysis library they are still listed, and calling them returns a tool error saying they
// are not available in this build.
#pragma once

#include "mcp/server.h"
#include "mcp/store_tools.h"

namespace gw::mcp {

void AddAnalysisTools(McpServer& server, ReaderSource& source, const StoreToolLimits& limits);

// Whether this build links src/analysis.
bool AnalysisAvailable();

}  // namespace gw::mcp
