// The pure half of Explain(): WindowData in, Report out. No I/O; unit tests call it directly
// with hand-built windows.
#pragma once

#include "analysis/report.h"
#include "analysis/window_data.h"

namespace gw {

Report Analyze(const WindowData& window, const ExplainOptions& options);

}  // namespace gw
