#include "kernels/common/cpu_info.h"

#include <cpuid.h>
#include <omp.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
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

CpuId cpu_id() {
  CpuId id;
  const CpuidBits v = cpuid(0, 0);
  char vendor[13] = {};
  std::memcpy(vendor, &v.ebx, 4);
  std::memcpy(vendor + 4, &v.edx, 4);
  std::memcpy(vendor + 8, &v.ecx, 4);
  id.vendor = vendor;
  // Intel SDM vol. 2A, CPUID leaf 1 EAX: the displayed family adds the
  // extended family where the base is 15; the displayed model puts the
  // extended model above the base where the family is 6 or 15.
  const unsigned eax = cpuid(1, 0).eax;
  const int base_family = static_cast<int>((eax >> 8) & 0xf), base_model = static_cast<int>((eax >> 4) & 0xf);
  id.family = base_family == 0xf ? base_family + static_cast<int>((eax >> 20) & 0xff) : base_family;
  id.model = base_family == 0x6 || base_family == 0xf ? (static_cast<int>((eax >> 16) & 0xf) << 4) + base_model
                                                      : base_model;
  id.stepping = static_cast<int>(eax & 0xf);
  return id;
}

std::string cpu_id_text(const CpuId& id) {
  return "family " + std::to_string(id.family) + " model " + std::to_string(id.model) + " stepping " +
         std::to_string(id.stepping) + " (" + id.vendor + ")";
}

std::string cpu_microarchitecture(const CpuId& id) {
  struct Range {
    const char* vendor;
    int family, model_lo, model_hi;
    const char* name;
  };
  // Server parts (and their desktop siblings of the same core), from the
  // vendors' family/model assignments.
  static constexpr Range kKnown[] = {
      {"AuthenticAMD", 0x17, 0x00, 0x2f, "zen"},  // Zen, Zen+ (Naples)
      {"AuthenticAMD", 0x17, 0x30, 0xff, "zen2"},  // Rome and later family 17h
      {"AuthenticAMD", 0x19, 0x00, 0x0f, "zen3"},  // Milan
      {"AuthenticAMD", 0x19, 0x10, 0x1f, "zen4"},  // Genoa, Bergamo (0xa0-0xaf)
      {"AuthenticAMD", 0x19, 0x20, 0x5f, "zen3"},
      {"AuthenticAMD", 0x19, 0x60, 0xaf, "zen4"},
      {"AuthenticAMD", 0x1a, 0x00, 0xff, "zen5"},  // Turin
      {"GenuineIntel", 6, 0x55, 0x55, "skylake-sp"},  // also Cascade Lake, Cooper Lake
      {"GenuineIntel", 6, 0x6a, 0x6a, "ice-lake-sp"},
      {"GenuineIntel", 6, 0x8f, 0x8f, "sapphire-rapids"},
      {"GenuineIntel", 6, 0xcf, 0xcf, "emerald-rapids"},
      {"GenuineIntel", 6, 0xad, 0xad, "granite-rapids"},
      {"GenuineIntel", 6, 0xaf, 0xaf, "sierra-forest"},
  };
  for (const Range& r : kKnown)
    if (id.vendor == r.vendor && id.family == r.family && id.model >= r.model_lo && id.model <= r.model_hi)
      return r.name;
  // Appended, not "f" + std::to_string(...): that trips GCC 12's false
  // -Wrestrict (GCC bug 105329).
  std::string name("f");
  name.append(std::to_string(id.family)).append("m").append(std::to_string(id.model));
  return name;
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
