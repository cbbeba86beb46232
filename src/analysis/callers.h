// Stack attribution for `explain` over a `trace --stack` recording: which source lines the
// window's CUDA time comes from ("Top cudaStreamSync callers") and where the feeding processes
// were when they left the CPU ("Top sched_switch victims").
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "analysis/report.h"
#include "analysis/window_data.h"

namespace gw {

// Where a stack "is" for a user: the innermost Python frame outside library code
// (site-packages, dist-packages, the standard library), else the innermost Python frame, else
// the innermost native frame with a source line, else the innermost resolved one.
struct StackSite {
  std::string key;   // full "file:line" (or function / module): what sites group by
  CallSite display;  // location, file, line, function, via filled
};
StackSite PickStackSite(const std::vector<StackFrameRow>& frames);

// A site as a report names it: "train.py:88 in train_step" (the function cut to 60 characters;
// a native site without line info is its function already).
std::string SiteName(const CallSite& s);

// Fills report->callers and report->sched_victims from the window's stack rows of `pids`.
// Pure: no I/O.
void AddCallerSections(const WindowData& w, const std::set<int32_t>& pids, Report* report);

// Reads each site's source line from its file where readable (I/O; called by Explain()).
void FillSourceLines(Report* report);

}  // namespace gw
