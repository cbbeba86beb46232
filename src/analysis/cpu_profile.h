// The on-CPU profile in explain: where a group of the job's threads spent its CPU (source line,
// function, the library code under it), from the cpu_sample rows that `trace --profile-hz`
// records. Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/facts.h"
#include "analysis/report.h"

namespace gw {

// The samples of `tids` taken in [from, to) (explain: the job's loop, Facts::loop_begin),
// grouped by site; nullopt when the window has no profile or none of those threads was sampled
// then.
std::optional<CpuProfileSection> ProfileThreads(const WindowData& w,
                                                const std::vector<int32_t>& tids, int64_t from,
                                                int64_t to);

// "train.py:88 in build_batch (41% of 612 samples)": the top site of a profile, for the
// findings' root lines; "" without one.
std::string TopSiteLine(const CpuProfileSection& p);

// The profile section's name for the thread that held the GIL most: "thread 42 (the GIL holder)".
std::string GilHolderTitle(int32_t tid);

// A thread's CPU spent writing files (WriterProfile, facts.h), from its on-CPU samples outside
// CUDA syncs: samples in the kernel under a libc write call (write, pwrite, writev, fsync, …:
// copying into the page cache, flushing), and every sample under a Python function that made
// such calls when at least thresholds::kWriterMinWriteShare of its samples were in them
// (serializing what it writes: torch.save's pickling and checksums). Samples taken in
// [from, to) only. Empty without a profile.
WriterProfile WriterSamples(const WindowData& w, int32_t tid, int64_t from, int64_t to);

// The main thread, the CUDA helper threads and the thread that held the GIL most, over the
// job's loop, each when it was on the CPU at least thresholds::kProfileShowShare of the loop
// (the GIL holder: when it held the main thread up at all). Fills report->cpu_profiles.
void AddCpuProfiles(const Facts& f, Report* report);

}  // namespace gw
