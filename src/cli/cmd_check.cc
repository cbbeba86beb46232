// gpuwhy check: can this machine trace? One line per check, ✓ or ✗ with a hint (the checks
// are src/check).
#include <cstdio>

#include "base/text.h"
#include "base/trusted_path.h"
#include "check/checks.h"
#include "cli/commands.h"

namespace gw {

int RunCheck(const Args& args) {
  FlagSet flags(
      "check", "gpuwhy check [flags]",
      "Checks that this machine can trace: kernel, BTF, tracefs (mounted when absent\n"
      "and running as root), uprobes, tracepoints, privileges, a real BPF program\n"
      "load, ptrace scope, CUDA libraries and the processes that map them, the\n"
      "NVIDIA driver and GPUs, NVML and GPM, and the CPython versions of CUDA processes.\n"
      "Exit status 0 when `gpuwhy trace` can run here, 1 when it cannot.");
  flags.Add({"json", FlagKind::kBool, "", "print the checks as JSON", ""})
      .Add({"cuda-lib", FlagKind::kString, "PATH", "also look at this library file or directory",
            ""})
      .Add({"nvml-lib", FlagKind::kString, "PATH",
            "load NVML from this file instead of libnvidia-ml.so.1", ""});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;

  if (!flags.positionals().empty()) {
    return ReportError(InvalidArgument("unexpected argument '" +
                                       TerminalSafe(flags.positionals()[0]) +
                                       "' — gpuwhy check takes flags only (gpuwhy check --help)"));
  }
  CheckOptions options;
  if (flags.Has("cuda-lib")) options.cuda_libs.push_back(flags.GetString("cuda-lib"));
  options.nvml_lib = flags.GetString("nvml-lib", "");
  if (Status st = CheckLoadableUnderSudo(options.nvml_lib, "--nvml-lib"); !st.ok()) {
    return ReportError(st);
  }
  CheckReport report = RunChecks(options);
  std::string out = flags.GetBool("json")
                        ? CheckReportToJson(report).dump(2, ' ', false,
                                                         nlohmann::json::error_handler_t::replace) +
                              "\n"
                        : CheckReportToText(report);
  std::fputs(out.c_str(), stdout);
  return report.CanTrace() ? kExitOk : kExitError;
}

}  // namespace gw
