// Internal: which of the main thread's feed causes each host-side finding blames, and the
// stretches of the window where that cause held the main thread (Finding::intervals).
#pragma once

#include <string>

#include "analysis/facts.h"
#include "analysis/report.h"
#include "analysis/rules.h"

namespace gw {

// The host-side findings (rules.cc's table, RuleSpec::blames): the rule whose finding blames a
// cause of the main thread's time, or nullptr for a rule that blames no single cause (sync-heavy,
// malloc-churn, gpu-sharing, ...).
const RuleSpec* BlamedCauseOf(const std::string& rule);

// Fills `intervals` of each host-side finding: maximal runs of whole seconds in which its cause
// took at least thresholds::kGpuBlameShare of a thread-second — of the main thread, or summed
// over the feeding threads where the cause counts there too. Needs the main thread's timeline;
// does nothing without one.
void AddFindingIntervals(const Facts& f, Report* r);

}  // namespace gw
