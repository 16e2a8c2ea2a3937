// roofline/<ceiling>: what this machine can do at best, in the same run as
// the operators. Memory ceilings report bytes_per_second, compute ceilings a
// `flops` rate. Sizes: STREAM arrays of 2^27 doubles (1 GiB each, over twice
// the largest last-level cache we run on), GEMMs large enough to be
// compute-bound. GPU memory: cudaMemcpy device to device (gpu_copy, one read
// to one write) and an own STREAM triad (gpu_triad, two reads to one write,
// as daxpy): on the H100 daxpy ran at 1.03-1.05x the copy ceiling, a mix of
// reads and writes the copy does not have; the figures read GPU cases
// against the higher of the two. gpu_fma also records the datasheet peak
// and the SM clock measured during a call.
#include <string>

#include "bench/cases/roofline_case.h"
#include "bench/harness.h"
#include "kernels/roofline/roofline.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kStreamN = std::int64_t{1} << 27;
constexpr std::int64_t kCpuFmaRounds = std::int64_t{1} << 22;
constexpr std::int64_t kGpuFmaRounds = std::int64_t{1} << 16;
constexpr std::int64_t kCpuGemm = 2048;
constexpr std::int64_t kGpuGemm = 8192;
constexpr std::int64_t kGpuCopyN = std::int64_t{1} << 27;  // 512 MiB of floats
constexpr std::int64_t kGpuTriadN = std::int64_t{1} << 26;  // 3 x 512 MiB of doubles, as daxpy at 2^26

void add_stream(StreamCase::Kind kind, const char* name) {
  add_case(case_name("roofline", name, {{"n", kStreamN}}), Device::cpu, [kind](benchmark::State& state) {
    auto* c = validated_case<StreamCase>(state, kind, kStreamN);
    if (c == nullptr) return;
    time_run(state, [c] { c->run(); }, c->context());
    set_bytes(state, c->bytes_per_call());
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
  add_fma(Device::gpu);
  add_sgemm(Device::gpu, "gpu_sgemm_cublas", kGpuGemm);
}

DLB_BENCH_FAMILY(register_roofline,
                 "the machine's ceilings (memory bandwidth, peak FMA rate, a library SGEMM) the other families are "
                 "read against");

}  // namespace
}  // namespace dlb::bench
