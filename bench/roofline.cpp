// roofline/<ceiling>: what this machine can do at best, in the same run as
// the operators. Memory ceilings report bytes_per_second, compute ceilings a
// `flops` rate. Sizes: STREAM arrays of 2^27 doubles (1 GiB each, over twice
// the largest last-level cache we run on), GEMMs large enough to be
// compute-bound.
#include <string>

#include "bench/cases/roofline_case.h"
#include "bench/harness.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kStreamN = std::int64_t{1} << 27;
constexpr std::int64_t kCpuFmaRounds = std::int64_t{1} << 22;
constexpr std::int64_t kGpuFmaRounds = std::int64_t{1} << 16;
constexpr std::int64_t kCpuGemm = 2048;
constexpr std::int64_t kGpuGemm = 8192;
constexpr std::int64_t kGpuCopyN = std::int64_t{1} << 27;  // 512 MiB of floats

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
  if (!config.gpu) return;
  add_case(case_name("roofline", "gpu_copy", {{"n", kGpuCopyN}}), Device::gpu, [](benchmark::State& state) {
    auto* c = validated_case<GpuCopyCase>(state, kGpuCopyN);
    if (c == nullptr) return;
    time_run(state, [c] { c->run(); }, c->context());
    set_bytes(state, c->bytes_per_call());
  });
  add_fma(Device::gpu);
  add_sgemm(Device::gpu, "gpu_sgemm_cublas", kGpuGemm);
}

DLB_BENCH_FAMILY(register_roofline);

}  // namespace
}  // namespace dlb::bench
