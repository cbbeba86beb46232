#include "sources/selftest/selftest.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/scoped.h"
#include "selftest.skel.h"
#include "sources/selftest/selftest_abi.h"

namespace gw {

namespace {
void DestroySkel(selftest_bpf* s) { selftest_bpf__destroy(s); }
using ScopedSkel = ScopedResource<selftest_bpf*, DestroySkel, nullptr>;

std::string PrivilegeHint(int err) {
  if (err == EPERM || err == EACCES) {
    return " — hint: run as root (sudo) or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN";
  }
  return "";
}
}  // namespace

Status RunBpfSelfTest() {
  libbpf_set_print(nullptr);  // the Status below carries what matters
  ScopedSkel skel(selftest_bpf__open());
  if (!skel) {
    int err = errno;
    return ErrnoStatus("open selftest BPF object", err);
  }
  skel.get()->rodata->target_tgid = static_cast<__u32>(getpid());
  if (int err = selftest_bpf__load(skel.get()); err != 0) {
    return Status(err == -EPERM || err == -EACCES ? StatusCode::kPermissionDenied
                                                  : StatusCode::kFailedPrecondition,
                  std::string("load selftest BPF program: ") + std::strerror(-err) +
                      PrivilegeHint(-err));
  }
  if (int err = selftest_bpf__attach(skel.get()); err != 0) {
    return Status(StatusCode::kFailedPrecondition,
                  std::string("attach selftest program to raw_tracepoint/sys_enter: ") +
                      std::strerror(-err) + PrivilegeHint(-err));
  }
  for (int i = 0; i < 3; ++i) (void)getppid();
  __u32 key = 0;
  struct gw_selftest_hits hits {};
  if (bpf_map__lookup_elem(skel.get()->maps.hits, &key, sizeof key, &hits, sizeof hits, 0) != 0) {
    return ErrnoStatus("read selftest counter", errno);
  }
  if (hits.count == 0) {
    return FailedPrecondition("selftest BPF program attached but never fired");
  }
  return Status::Ok();
}

}  // namespace gw
