// Facts about the machine, read from /proc, /sys and uname (no external tools).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gw {

struct GpuInfo {
  std::string model;    // "NVIDIA H200"
  std::string bus_id;   // "0000:00:05.0"
};

struct HostInfo {
  std::string host;
  std::string kernel;      // uname -r
  std::string cpu_model;
  int64_t cores = 0;       // online CPUs
  int64_t mem_bytes = 0;   // MemTotal
  std::string gpu_driver;  // NVIDIA kernel module version, "" when none
  std::vector<GpuInfo> gpus;
};

HostInfo ReadHostInfo();
// "580.159.04" from /proc/driver/nvidia/version, or "" when the driver is not loaded.
std::string ReadNvidiaDriverVersion(const std::string& proc_root = "/proc");
std::vector<GpuInfo> ReadNvidiaGpus(const std::string& proc_root = "/proc");

// Reads a whole small file; "" when unreadable.
std::string ReadSmallFile(const std::string& path);

}  // namespace gw
