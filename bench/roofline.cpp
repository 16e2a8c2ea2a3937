// roofline/<ceiling>: what this machine can do at best, in the same run as
// the operators. Memory ceilings report bytes_per_second, compute ceilings a
// `flops` rate. Sizes: STREAM arrays of 2^27 doubles (1 GiB each, over twice
// the largest last-level cache we run on), GEMMs large enough to be
// compute-bound. GPU memory: gpu_memory is the ceiling, the fastest of
// several streaming kernels (copies, two reads to one write into a third
// array and in place, both launch shapes; roofline_memory.h says why), each
// moving 1.5 GiB a call, its label the part that won and a counter per part.
// On the H200 (2026-11-27) daxpy gpu_naive ran at 4.34 TB/s, above both
// gpu_copy (cudaMemcpy device to device, 4.24) and gpu_triad (an own STREAM
// triad, 4.09): a ceiling one kernel defines bounds only what that kernel
// does best. gpu_copy and gpu_triad stay, as parts on their own. gpu_fma
// also records the datasheet peak and the SM clock measured during a call.
#include <iterator>
#include <string>

#include "bench/cases/roofline_case.h"
#include "bench/harness.h"
#include "kernels/roofline/roofline.h"
#include "kernels/roofline/roofline_memory.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kStreamN = std::int64_t{1} << 27;
constexpr std::int64_t kCpuFmaRounds = std::int64_t{1} << 22;
constexpr std::int64_t kGpuFmaRounds = std::int64_t{1} << 16;
constexpr std::int64_t kCpuGemm = 2048;
constexpr std::int64_t kGpuGemm = 8192;
constexpr std::int64_t kGpuCopyN = std::int64_t{1} << 27;  // 512 MiB of floats
constexpr std::int64_t kGpuTriadN = std::int64_t{1} << 26;  // 3 x 512 MiB of doubles, as daxpy at 2^26
constexpr std::int64_t kGpuMemoryBytes = std::int64_t{3} << 29;  // 1.5 GiB a call, as daxpy at 2^26

void add_stream(StreamCase::Kind kind, const char* name) {
  add_case(case_name("roofline", name, {{"n", kStreamN}}), Device::cpu, [kind](benchmark::State& state) {
    auto* c = validated_case<StreamCase>(state, kind, kStreamN);
    if (c == nullptr) return;
    time_run(state, [c] { c->run(); }, c->context());
    set_bytes(state, c->bytes_per_call());
    // Whether the destination was read for ownership (plain stores), which
    // the counted bytes leave out.
    state.SetLabel(stream_store_kind());
  });
}

void add_fma(Device device) {
  const auto rounds = device == Device::cpu ? kCpuFmaRounds : kGpuFmaRounds;
  add_case(case_name("roofline", device == Device::cpu ? "cpu_fma" : "gpu_fma", {}), device,
           [device, rounds](benchmark::State& state) {
             auto* c = validated_case<FmaPeakCase>(state, device, rounds);
             if (c == nullptr) return;
             time_run(state, [c] { c->run(); }, c->context(), Timing{.flush_l2 = false});
             set_flops(state, c->flops_per_call());
             state.SetLabel(c->label());
#if DLB_HAVE_CUDA
             if (device == Device::gpu) {
               // What the rate is a share of: the datasheet peak (every lane
               // at the maximum SM clock) and the peak at the clock the SMs
               // ran at during a call, so that a gap says whether the chip
               // clocked down or the kernel fell short.
               const double clock = c->measured_sm_clock_hz();
               const double datasheet = gpu_datasheet_fma_flops();
               state.counters["sm_clock_hz"] = clock;
               state.counters["datasheet_flops"] = datasheet;
               state.counters["peak_flops_at_clock"] = datasheet * clock / gpu_max_sm_clock_hz();
             }
#endif
           });
}

void add_sgemm(Device device, const char* name, std::int64_t size) {
  add_case(case_name("roofline", name, {{"m", size}, {"n", size}, {"k", size}}), device,
           [device, size](benchmark::State& state) {
             auto* c = validated_case<SgemmCase>(state, device, size, size, size);
             if (c == nullptr) return;
             time_run(state, [c] { c->run(); }, c->context(), Timing{.flush_l2 = false});
             set_flops(state, c->flops_per_call());
           });
}

void register_roofline(Config& config) {
  add_stream(StreamCase::Kind::copy, "cpu_copy");
  add_stream(StreamCase::Kind::triad, "cpu_triad");
  add_fma(Device::cpu);
#if DLB_HAVE_ONEDNN
  add_sgemm(Device::cpu, "cpu_sgemm_onednn", kCpuGemm);
#endif
  if (!config.gpu && !config.name_only) return;
  add_case(case_name("roofline", "gpu_copy", {{"n", kGpuCopyN}}), Device::gpu, [](benchmark::State& state) {
    auto* c = validated_case<GpuCopyCase>(state, kGpuCopyN);
    if (c == nullptr) return;
    time_run(state, [c] { c->run(); }, c->context());
    set_bytes(state, c->bytes_per_call());
  });
  add_case(case_name("roofline", "gpu_triad", {{"n", kGpuTriadN}}), Device::gpu, [](benchmark::State& state) {
    auto* c = validated_case<GpuTriadCase>(state, kGpuTriadN);
    if (c == nullptr) return;
    time_run(state, [c] { c->run(); }, c->context());
    set_bytes(state, c->bytes_per_call());
  });
  add_case(case_name("roofline", "gpu_memory", {{"bytes", kGpuMemoryBytes}}), Device::gpu,
           [](benchmark::State& state) {
             auto* c = validated_case<GpuMemoryCase>(state, static_cast<double>(kGpuMemoryBytes));
             if (c == nullptr) return;
             time_run(state, [c] { c->run(); }, c->context());
             set_bytes(state, c->bytes_per_call());
             // Which part the ceiling is, and what each part reached in the
             // choice (timed as this case is, median of 5 calls each).
             state.SetLabel(std::string(c->chosen()));
             for (std::size_t p = 0; p < std::size(kGpuMemoryParts); ++p)
               state.counters[std::string(kGpuMemoryParts[p].name) + "_bytes_per_second"] = c->part_rates()[p];
           });
  add_fma(Device::gpu);
  add_sgemm(Device::gpu, "gpu_sgemm_cublas", kGpuGemm);
}

DLB_BENCH_FAMILY(register_roofline,
                 "the machine's ceilings (memory bandwidth, peak FMA rate, a library SGEMM) the other families are "
                 "read against");

}  // namespace
}  // namespace dlb::bench
