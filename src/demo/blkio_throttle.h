// Slow storage made for real: a cgroup-v1 blkio group that caps the read bandwidth of the
// block device holding a file. The io-bottleneck live demo puts its workload in one, so the
// worker's O_DIRECT reads wait on the disk however fast the machine's disk is.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include "base/status.h"

namespace gw {

class BlkioThrottle {
 public:
  // Creates /sys/fs/cgroup/blkio/gpuwhy-demo-<pid> with read_bps_device set to `read_bps` for
  // the whole disk under `file` (a partition's reads are throttled at its disk). Fails with a
  // clear message when cgroup v1 blkio is not mounted or the device cannot be found.
  static StatusOr<BlkioThrottle> Create(const std::string& file, int64_t read_bps);

  BlkioThrottle(BlkioThrottle&& other) noexcept;
  BlkioThrottle& operator=(BlkioThrottle&&) = delete;
  BlkioThrottle(const BlkioThrottle&) = delete;
  BlkioThrottle& operator=(const BlkioThrottle&) = delete;
  // Removes the group; the kernel refuses while a process is still in it, so destroy this
  // after the children have been reaped.
  ~BlkioThrottle();

  // Moves `pid` into the group; the processes it forks afterwards are in it too.
  Status Add(pid_t pid) const;
  const std::string& device() const { return device_; }

 private:
  BlkioThrottle(std::string dir, std::string device)
      : dir_(std::move(dir)), device_(std::move(device)) {}
  std::string dir_;     // the cgroup directory; empty once moved from
  std::string device_;  // "MAJ:MIN" of the throttled disk
};

}  // namespace gw
