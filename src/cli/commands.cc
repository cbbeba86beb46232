#include "cli/commands.h"

namespace gw {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = {
      {"check", "check that this machine can trace (BPF, BTF, privileges, CUDA libraries)",
       RunCheck},
      {"mcp", "serve a recording to an AI assistant (Model Context Protocol, stdio)", RunMcp},
      {"explain", "explain why the GPU job is slow: causal chains with evidence and fixes",
       RunExplain},
      {"export", "write a recording as a Perfetto trace or folded stacks (flame graphs)",
       RunExport},
      {"report", "write a self-contained HTML report: findings, timeline charts, attribution",
       RunReport},
      {"demo", "record a synthetic scenario (no root, no GPU) and explain it", RunDemo},
      {"diff", "compare two recordings before/after a fix", RunDiff},
      {"fleet", "rank the nodes in ClickHouse by GPU-feed time lost, with each one's top finding",
       RunFleet},
      {"query", "run read-only SQL against a recording", RunQuery},
      {"sessions", "list the recording sessions in a database (span, events, size)", RunSessions},
      {"prune", "remove old recording sessions from a database", RunPrune},
      {"trace", "trace CUDA calls and host kernel events of GPU jobs into the database",
       RunTrace},
      {"version", "print the gpuwhy version", RunVersion},
  };
  return kCommands;
}

}  // namespace gw
