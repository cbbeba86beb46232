// gpuwhy: explains why a GPU job is slow when nvidia-smi says the GPU is busy.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/text.h"
#include "cli/commands.h"

namespace {

// "gpuwhy: unknown command 'chekc' — did you mean `gpuwhy check`? …"
void UnknownCommand(const std::string& name) {
  std::vector<std::string> names = {"help"};
  for (const gw::Command& c : gw::AllCommands()) names.push_back(c.name);
  std::string guess = gw::ClosestWord(name, names);
  std::fprintf(stderr, "gpuwhy: unknown command '%s'%s — run `gpuwhy help` for the list\n",
               gw::TerminalSafe(name).c_str(),
               guess.empty() ? "" : (" — did you mean `gpuwhy " + guess + "`?").c_str());
}

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "gpuwhy %s — why is my GPU job slow when nvidia-smi says the GPU is busy?\n\n"
               "Usage: gpuwhy <command> [flags]\n\nCommands:\n",
               gw::VersionString().c_str());
  for (const gw::Command& c : gw::AllCommands()) {
    std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  }
  std::fprintf(out, "  %-10s %s\n", "help", "show this help, or `gpuwhy help <command>`");
  std::fprintf(out, "\nRun `gpuwhy <command> --help` for a command's flags.\n");
}

}  // namespace

int main(int argc, char** argv) {
  gw::SetCommandLine(argc, argv);
  if (argc < 2) {
    PrintUsage(stderr);
    return gw::kExitUsage;
  }
  std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    if (argc >= 3 && (argv[2] == std::string("--help") || argv[2] == std::string("-h"))) {
      PrintUsage(stdout);  // `gpuwhy help --help`: help about help is the command list
      return gw::kExitOk;
    }
    if (argc >= 3) {
      for (const gw::Command& c : gw::AllCommands()) {
        if (argv[2] == std::string(c.name)) return c.run({"--help"});
      }
      UnknownCommand(argv[2]);
      return gw::kExitUsage;
    }
    PrintUsage(stdout);
    return gw::kExitOk;
  }
  if (name == "--version") return gw::RunVersion({});
  gw::Args args(argv + 2, argv + argc);
  for (const gw::Command& c : gw::AllCommands()) {
    if (name == c.name) return c.run(args);
  }
  UnknownCommand(name);
  return gw::kExitUsage;
}
