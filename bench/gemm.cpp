// gemm/<variant>/m:<m>/n:<n>/k:<k>: C[m,n] = A[m,k] * B[k,n], fp32 and the
// reduced precisions (kernels/gemm/gemm.h says what each timed call
// includes). Counters: `flops` = 2mnk for every variant (integer
// multiply-adds counted the same), max_rel_err against the reference of the
// inputs the variant was given, and err_vs_f32 against the fp32 problem for
// every variant that is not fp32. The label names oneDNN's implementation
// (e.g. brg:avx512_core_amx_int8). With --gemm=m:M/n:N/k:K
// (bench/user_shapes.h): that shape alone, every variant (with --suite given
// too: that shape and the suite's).
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/cases/gemm_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"

namespace dlb::bench {
namespace {

using Shape = GemmShape;
double macs(const Shape& s) { return static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k); }

constexpr Shape kShapes[] = {
    // Square.
    {128, 128, 128},
    {512, 512, 512},
    {1024, 1024, 1024},
    {2048, 2048, 2048},
    {4096, 4096, 4096},
    // MNIST CNN fc1 (9216 -> 128), batch 1 and 64.
    {1, 128, 9216},
    {64, 128, 9216},
    // ResNet20 fc (64 -> 10), batch 1 and 64.
    {1, 10, 64},
    {64, 10, 64},
    // DeepBench inference_server_set (code/kernels/gemm_problems.h), whose (m, n, k)
    // are (layer outputs, batch, layer inputs): here m = its n, n = its m.
    {700, 5124, 2048},  // (5124, 700, 2048): speech model layer, 700 time steps
    {700, 35, 2048},    // (35, 700, 2048): a narrow layer, n not a multiple of 4
    {1, 7680, 2560},    // (7680, 1, 2560): batch 1, reads the weights once (memory-bound)
    {1500, 3072, 1024}, // (3072, 1500, 1024)
};

// The plain-loop variants (cpu_naive_f32, cpu_ref_s8: one thread, for
// scale) take seconds per call beyond 1024^3; the default suite stops there,
// and so do the user's shapes (their own variants run every shape).
constexpr double kPlainLoopMaxMacs = 1024.0 * 1024.0 * 1024.0;

bool plain_loops(std::string_view variant) {
  return variant.find("_naive_") != std::string_view::npos || variant.find("_ref_") != std::string_view::npos;
}

// GPU cases flush L2 between calls where the GEMM is memory-bound (weights
// arrive from DRAM in inference): below 64 flops per byte of fp32 A, B and C.
bool memory_bound(const Shape& s) {
  const double bytes = 4.0 * static_cast<double>(s.m * s.k + s.k * s.n + s.m * s.n);
  return 2.0 * macs(s) / bytes < 64.0;
}

// The user's shapes (registered whatever the suite), then the family's own
// where wanted, but those the user gave.
std::vector<std::pair<Shape, bool>> shapes() {
  std::vector<std::pair<Shape, bool>> out;
  const auto& user = user_shapes().gemm;
  for (const Shape& s : user) out.emplace_back(s, true);
  if (own_shapes_wanted())
    for (const Shape& s : kShapes)
      if (!is_user_shape(user, s)) out.emplace_back(s, false);
  return out;
}

void register_gemm(Config& config) {
  for (const GemmVariant* variant : variants_to_run(gemm_variants(), config)) {
    for (const auto& [s, user] : shapes()) {
      if (plain_loops(variant->name) && macs(s) > kPlainLoopMaxMacs) continue;
      std::optional<SuiteBypass> bypass;
      if (user) bypass.emplace();
      add_case(case_name("gemm", variant->name, {{"m", s.m}, {"n", s.n}, {"k", s.k}}), variant->device,
               [variant, s = s](benchmark::State& state) {
                 auto* c = validated_case<GemmCase>(state, *variant, s.m, s.n, s.k);
                 if (c == nullptr) return;
                 time_run(state, [c] { c->run(); }, c->context(), Timing{.flush_l2 = memory_bound(s)});
                 set_flops(state, c->flops_per_call());
                 if (c->precision() != GemmPrecision::f32) state.counters["err_vs_f32"] = c->err_vs_f32();
                 if (!c->implementation().empty()) state.SetLabel(c->implementation());
               });
    }
  }
}

DLB_BENCH_FAMILY(register_gemm,
                 "GEMM (C = A*B) at square sizes and the networks' shapes: own kernels against the libraries, fp32 "
                 "and reduced precision");

}  // namespace
}  // namespace dlb::bench
