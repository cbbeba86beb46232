#include "sources/host/host_decode.h"

#include <unistd.h>

#include <cstring>

namespace gw {

void DecodeHostRecord(const gw_host_record& r, const SessionClock& clock,
                      HostRecordContext& context, std::vector<Event>* out) {
  int32_t pid = static_cast<int32_t>(r.tgid);
  int32_t tid = static_cast<int32_t>(r.tid);
  std::string comm(r.comm, strnlen(r.comm, sizeof r.comm));
  Event e;
  e.ts_ns = clock.ToSession(r.ts_ns);
  e.pid = pid;
  e.tid = tid;
  e.cpu = r.cpu;
  switch (static_cast<gw_host_record_type>(r.type)) {
    case GW_HOST_OFF_CPU: {
      e.op = Op::kSchedSwitch;
      e.duration_ns = static_cast<int64_t>(r.duration_ns);
      e.runq_ns = static_cast<int64_t>(r.aux0);
      e.kind = r.kind;
      e.other_pid = r.other_tgid;
      if (r.stack_id != 0) e.stack_id = static_cast<int64_t>(r.stack_id);
      if ((r.flags & GW_OFF_CPU_WOKEN) != 0) {
        e.waker_pid = r.waker_tgid;
        e.waker_tid = r.waker_tid;
      }
      context.SawProcess(pid, "", (r.flags & GW_OFF_CPU_COMPETITOR) == 0, 0);
      context.SawProcess(static_cast<int32_t>(r.other_tgid), "", false, 0);
      out->push_back(e);
      if (r.kind == GW_SWITCH_BLOCKED_FAULT && r.value > 0) {
        Event f;
        f.op = Op::kMajorFault;
        f.pid = pid;
        f.tid = tid;
        f.cpu = r.cpu;
        f.ts_ns = clock.ToSession(static_cast<uint64_t>(r.value));
        f.duration_ns =
            static_cast<int64_t>(r.ts_ns + r.duration_ns) - static_cast<int64_t>(r.value);
        f.addr = static_cast<int64_t>(r.aux1);
        f.name_id = context.FilePathId(pid, r.aux1, 0);
        out->push_back(f);
      }
      return;
    }
    case GW_HOST_CPU_SAMPLE:
      e.op = Op::kCpuSample;
      e.kind = r.kind;
      if (r.stack_id != 0) e.stack_id = static_cast<int64_t>(r.stack_id);
      break;
    case GW_HOST_FILE_FAULT:
      e.op = Op::kFileFault;
      e.addr = static_cast<int64_t>(r.aux0);
      e.name_id = context.FilePathId(pid, r.aux0, static_cast<uint64_t>(r.value));
      break;
    case GW_HOST_RECLAIM:
      e.op = Op::kDirectReclaim;
      e.duration_ns = static_cast<int64_t>(r.duration_ns);
      e.bytes = static_cast<int64_t>(r.aux0) * sysconf(_SC_PAGESIZE);
      context.SawProcess(pid, "", false, 0);
      break;
    case GW_HOST_BLOCK_IO:
      e.op = Op::kBlockIo;
      e.duration_ns = static_cast<int64_t>(r.duration_ns);
      e.addr = static_cast<int64_t>(r.aux0);
      e.bytes = r.value;
      e.kind = r.kind;
      e.ret = r.error;
      e.name_id = context.DeviceNameId(r.aux1);
      break;
    case GW_HOST_EXEC:
      e.op = Op::kProcExec;
      context.ProcessExec(pid, comm);
      break;
    case GW_HOST_FORK:
      e.op = Op::kProcFork;
      e.other_pid = r.other_tgid;
      context.ProcessFork(pid, static_cast<int32_t>(r.other_tgid), comm, e.ts_ns);
      break;
    case GW_HOST_EXIT: {
      e.op = Op::kProcExit;
      // Shell convention: exit status, or 128 + signal for a killed process.
      int64_t code = r.value;
      int64_t status = (code & 0x7f) != 0 ? 128 + (code & 0x7f) : (code >> 8) & 0xff;
      e.ret = status;
      e.other_pid = r.other_tgid;
      context.ProcessExit(pid, comm, r.flags == 0, static_cast<int32_t>(r.other_tgid), e.ts_ns,
                          status);
      break;
    }
    case GW_HOST_OOM:
      e.op = Op::kOomKill;
      context.SawProcess(pid, comm, false, 0);
      break;
    case GW_HOST_READ:
      // write: kind 0 a write-family call, 1 fsync/fdatasync (no bytes); read: no kind.
      e.op = r.kind == GW_SYSCALL_READ ? Op::kRead : Op::kWrite;
      if (e.op == Op::kWrite) e.kind = r.kind == GW_SYSCALL_SYNC ? 1 : 0;
      e.duration_ns = static_cast<int64_t>(r.duration_ns);
      e.ret = r.value;
      e.bytes = r.value >= 0 && r.kind != GW_SYSCALL_SYNC ? r.value : kNull;
      e.addr = static_cast<int64_t>(r.aux0);  // file descriptor
      break;
    case GW_HOST_NAME:
      context.SawProcess(pid, comm, false, 0);
      return;  // no row: only names the competitor
  }
  out->push_back(e);
}

}  // namespace gw
