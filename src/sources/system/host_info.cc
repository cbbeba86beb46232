#include "sources/system/host_info.h"

#include <dirent.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "base/text.h"

namespace gw {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReadNvidiaDriverVersion(const std::string& proc_root) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..."
  std::string text = ReadSmallFile(proc_root + "/driver/nvidia/version");
  std::smatch m;
  static const std::regex kVersion(R"(Kernel Module\s+([0-9]+\.[0-9]+(\.[0-9]+)?))");
  if (std::regex_search(text, m, kVersion)) return m[1].str();
  return "";
}

std::vector<GpuInfo> ReadNvidiaGpus(const std::string& proc_root) {
  std::vector<GpuInfo> gpus;
  std::string dir = proc_root + "/driver/nvidia/gpus";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return gpus;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string info = ReadSmallFile(dir + "/" + e->d_name + "/information");
    GpuInfo g;
    g.bus_id = e->d_name;
    std::istringstream lines(info);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("Model:", 0) == 0) g.model = TrimSpace(line.substr(6));
    }
    gpus.push_back(g);
  }
  closedir(d);
  return gpus;
}

HostInfo ReadHostInfo() {
  HostInfo h;
  struct utsname u;
  if (uname(&u) == 0) {
    h.host = u.nodename;
    h.kernel = u.release;
  }
  std::istringstream cpuinfo(ReadSmallFile("/proc/cpuinfo"));
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) h.cpu_model = TrimSpace(line.substr(colon + 1));
      break;
    }
  }
  h.cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::istringstream meminfo(ReadSmallFile("/proc/meminfo"));
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      h.mem_bytes = std::stoll(line.substr(9)) * 1024;
      break;
    }
  }
  h.gpu_driver = ReadNvidiaDriverVersion();
  h.gpus = ReadNvidiaGpus();
  return h;
}

}  // namespace gw
