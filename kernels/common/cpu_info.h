// The CPU this process runs on: model, the cores it may use, and the ISA
// extensions variants check at run time before they register.
#pragma once

#include <string>

namespace dlb {

std::string cpu_model();          // "Intel(R) Xeon(R) Processor", from /proc/cpuinfo

// What CPUID says the processor is. A VM's model string can be as generic as
// "AMD EPYC", which two VMs with a 2x different FMA rate have both reported
// here; the family and model tell such CPUs apart.
struct CpuId {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD"
  int family = 0, model = 0, stepping = 0;  // as Linux's /proc/cpuinfo shows them (extended fields added)
};
CpuId cpu_id();
// "family 25 model 17 stepping 1 (AuthenticAMD)"
std::string cpu_id_text(const CpuId& id);
// The microarchitecture of a vendor/family/model, for the server parts this
// tool meets ("zen4", "sapphire-rapids"), else "f<family>m<model>".
std::string cpu_microarchitecture(const CpuId& id);
int cpu_cores_usable();           // CPUs in this process's affinity mask
int cpu_threads();                // what OpenMP regions will use (omp_get_max_threads)
bool cpu_has_avx2_fma();
bool cpu_has_avx512f();
bool cpu_has_avx512_vnni();
bool cpu_has_avx512_bf16();
// AMX tiles for int8 / bf16: the CPU has them and the kernel allowed this
// process to use them (Linux arch_prctl permission request, done once).
bool cpu_has_amx_int8();
bool cpu_has_amx_bf16();
// Widest vector ISA this build and CPU both support: "avx512", "avx2" or "scalar".
std::string cpu_vector_isa();

// CPU libraries in this build: "2.6.3" / "none".
std::string onednn_version();
// The ISA oneDNN dispatches to on this CPU ("avx512_core_amx"), or "none".
std::string onednn_isa();
std::string eigen_version();

}  // namespace dlb
