// Internal: which of the main thread's feed causes each host-side finding blames, and the
// stretches of the window where that cause held the main thread (Finding::intervals).
#pragma once

#include <string>

#include "analysis/facts.h"
#include "analysis/report.h"

namespace gw {

// What the main thread was doing while a finding's cause held it.
struct BlamedCause {
  const char* rule;
  FeedCause cause;
  const char* phrase;  // "while the main thread waited for a CPU"
  // Whether the cause also counts in the other feeding threads (the training process's CUDA
  // callers and the workers): a worker waiting for a CPU or for I/O holds the main thread up
  // through the batch it owes, while a worker blocked otherwise is just idle.
  bool in_feeders;
};

// The host-side findings and their causes; nullptr for a rule that blames no single cause
// (sync-heavy, malloc-churn, gpu-contention, ...).
const BlamedCause* BlamedCauseOf(const std::string& rule);
// Every entry, for sums over all host-side causes.
const BlamedCause* BlamedCausesBegin();
const BlamedCause* BlamedCausesEnd();

// Fills `intervals` of each host-side finding: maximal runs of whole seconds in which its cause
// took at least thresholds::kGpuBlameShare of a thread-second — of the main thread, or summed
// over the feeding threads where the cause counts there too. Needs the main thread's timeline;
// does nothing without one.
void AddFindingIntervals(const Facts& f, Report* r);

}  // namespace gw
