#include "kernels/common/cpu_info.h"

#include <cpuid.h>
#include <omp.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

#if DLB_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif
#if DLB_HAVE_EIGEN
#include <Eigen/Core>
#endif

namespace dlb {
namespace {

struct CpuidBits {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidBits cpuid(unsigned leaf, unsigned subleaf) {
  CpuidBits r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return {};
  return r;
}

// XCR0: which register states the OS saves (and so allows).
unsigned long long xcr0() {
  if (!(cpuid(1, 0).ecx & (1u << 27))) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool os_saves_avx() { return (xcr0() & 0x6) == 0x6; }
bool os_saves_avx512() { return (xcr0() & 0xe6) == 0xe6; }

// Linux gives AMX tile data to a process only after it asks (kernel >= 5.16).
bool request_amx_permission() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
}

}  // namespace

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

int cpu_cores_usable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return CPU_COUNT(&set);
}

int cpu_threads() { return omp_get_max_threads(); }

bool cpu_has_avx2_fma() {
  return os_saves_avx() && (cpuid(7, 0).ebx & (1u << 5)) && (cpuid(1, 0).ecx & (1u << 12));
}
bool cpu_has_avx512f() { return os_saves_avx512() && (cpuid(7, 0).ebx & (1u << 16)); }
bool cpu_has_avx512_vnni() { return cpu_has_avx512f() && (cpuid(7, 0).ecx & (1u << 11)); }
bool cpu_has_avx512_bf16() { return cpu_has_avx512f() && (cpuid(7, 1).eax & (1u << 5)); }
bool cpu_has_amx_int8() { return (cpuid(7, 0).edx & (1u << 25)) && (cpuid(7, 0).edx & (1u << 24)) && request_amx_permission(); }
bool cpu_has_amx_bf16() { return (cpuid(7, 0).edx & (1u << 22)) && (cpuid(7, 0).edx & (1u << 24)) && request_amx_permission(); }

std::string cpu_vector_isa() {
#if defined(__AVX512F__)
  if (cpu_has_avx512f()) return "avx512";
#endif
#if defined(__AVX2__) && defined(__FMA__)
  if (cpu_has_avx2_fma()) return "avx2";
#endif
  return "scalar";
}

#if DLB_HAVE_ONEDNN
std::string onednn_version() {
  const auto* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string onednn_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}
#else
std::string onednn_version() { return "none"; }
std::string onednn_isa() { return "none"; }
#endif

std::string eigen_version() {
#if DLB_HAVE_EIGEN
  return std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION);
#else
  return "none";
#endif
}

}  // namespace dlb
