#include "sources/stacks/stacks_test_util.h"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "elf/elf_file.h"
#include "stacks_test.skel.h"

namespace gw {

std::string StackTestPath(const char* name, const char* built) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : built;
}

void DestroyStacksTestSkel(stacks_test_bpf* skel) { stacks_test_bpf__destroy(skel); }
void DestroyStacksTestLink(bpf_link* link) { bpf_link__destroy(link); }

StatusOr<std::unique_ptr<StackTestProbe>> StackTestProbe::Create(StackRegistry* registry,
                                                                 bool capture,
                                                                 uint64_t budget_interval_ns,
                                                                 uint32_t budget_burst) {
  std::unique_ptr<StackTestProbe> p(new StackTestProbe());
  p->skel_.Reset(stacks_test_bpf__open());
  if (!p->skel_) return ErrnoStatus("open stacks_test BPF object", errno);
  p->skel_.get()->rodata->capture = capture ? 1 : 0;
  p->skel_.get()->rodata->budget_interval_ns = budget_interval_ns;
  p->skel_.get()->rodata->budget_burst = budget_burst;
  RETURN_IF_ERROR(registry->ShareMaps(p->skel_.get()->obj));
  if (int err = stacks_test_bpf__load(p->skel_.get()); err != 0) {
    return Status(StatusCode::kFailedPrecondition,
                  std::string("load stacks_test BPF program: ") + std::strerror(-err));
  }
  return p;
}

Status StackTestProbe::Attach(const std::string& library, int32_t pid,
                              const std::string& function) {
  ASSIGN_OR_RETURN(std::unique_ptr<ElfFile> elf, ElfFile::Open(library));
  std::optional<uint64_t> offset = elf->FunctionFileOffset(function);
  if (!offset) return NotFound(function + " not found in " + library);
  link_.Reset(bpf_program__attach_uprobe(skel_.get()->progs.gw_stacks_test_probe, false, pid,
                                         library.c_str(), *offset));
  if (!link_) {
    return ErrnoStatus("attach uprobe " + function + " in " + library, errno);
  }
  return Status::Ok();
}

Status StackTestProbe::AttachSchedSwitch(int32_t pid) {
  uint32_t k = 4;
  uint64_t v = static_cast<uint64_t>(pid);
  if (bpf_map__update_elem(skel_.get()->maps.gw_test_result, &k, sizeof k, &v, sizeof v, 0) != 0) {
    return ErrnoStatus("set sched_switch target", errno);
  }
  sched_link_.Reset(bpf_program__attach(skel_.get()->progs.gw_stacks_test_switch));
  if (!sched_link_) return ErrnoStatus("attach tp_btf/sched_switch", errno);
  return Status::Ok();
}

uint64_t StackTestProbe::Result(uint32_t index) const {
  uint64_t v = 0;
  (void)bpf_map__lookup_elem(skel_.get()->maps.gw_test_result, &index, sizeof index, &v, sizeof v,
                             0);
  return v;
}

StatusOr<std::unique_ptr<TargetProcess>> TargetProcess::Start(
    const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  ScopedFd in_read(in[0]), in_write(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  ScopedFd out_read(out[0]), out_write(out[1]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    dup2(in_read.get(), 0);
    dup2(out_write.get(), 1);
    execv(args[0], args.data());
    _exit(127);
  }
  std::unique_ptr<TargetProcess> t(new TargetProcess());
  t->pid_ = pid;
  t->to_child_ = std::move(in_write);
  t->from_child_ = std::move(out_read);
  return t;
}

TargetProcess::~TargetProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    (void)Wait();
  }
}

std::string TargetProcess::ReadLine(int timeout_ms) {
  for (;;) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    struct pollfd p = {from_child_.get(), POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return "";
    char buf[512];
    ssize_t n = read(from_child_.get(), buf, sizeof buf);
    if (n <= 0) return "";
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void TargetProcess::WriteLine(const std::string& line) {
  std::string l = line + "\n";
  (void)!write(to_child_.get(), l.data(), l.size());
}

int TargetProcess::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

}  // namespace gw
