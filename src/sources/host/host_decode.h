// The host source's decoder: a host record → its rows (none, one, or an off-CPU interval and
// the major fault it waited on). No BPF and no /proc: names come from, and the process
// bookkeeping a record implies goes to, a HostRecordContext (HostSource implements it), so it
// is unit-tested on synthetic records without root (host_decode_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sources/host/host_abi.h"
#include "sources/source.h"
#include "store/event.h"

namespace gw {

class HostRecordContext {
 public:
  virtual ~HostRecordContext() = default;
  // Interned id of the file mapped at `addr` in `pid` (`inode` from the record; 0 = unknown).
  virtual int64_t FilePathId(int32_t pid, uint64_t addr, uint64_t inode) = 0;
  // Interned id of a block device's name.
  virtual int64_t DeviceNameId(uint64_t dev) = 0;
  // `pid` ran, waited or was named: its process row, once (comm "" = read it from /proc;
  // ppid 0 = read it too).
  virtual void SawProcess(int32_t pid, const std::string& comm, bool tracked, int32_t ppid) = 0;
  virtual void ProcessExec(int32_t pid, const std::string& comm) = 0;
  virtual void ProcessFork(int32_t parent, int32_t child, const std::string& comm,
                           int64_t ts_ns) = 0;
  // `status`: the exit status, or 128 + signal.
  virtual void ProcessExit(int32_t pid, const std::string& comm, bool tracked, int32_t ppid,
                           int64_t ts_ns, int64_t status) = 0;
};

// Appends the rows of `record` to *out.
void DecodeHostRecord(const gw_host_record& record, const SessionClock& clock,
                      HostRecordContext& context, std::vector<Event>* out);

}  // namespace gw
