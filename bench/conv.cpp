// conv/<variant>/n:../c:../h:../w:../k:../r:../s:../stride:../pad:..: every
// convolution variant on the default shapes (ResNet20 and MNIST CNN layers
// at batch 1 and 64, see conv_default_shapes), or, with
//     bench --conv=n64c16h32w32k16r3s3stride1pad1[,more descriptors]
// (the flag may also be repeated, or the shapes come from --shapes=FILE:
// bench/user_shapes.h) on those shapes alone; with --suite given too, on
// those and the suite's.
// flops counts 2*n*k*oh*ow*c*r*s for every algorithm, so a Winograd or FFT
// variant that does fewer multiplications shows a higher rate. The label
// names the shape's origin and the implementation the library picked;
// cuDNN cases add workspace_bytes, gpu_cudnn_find its search_seconds (and
// its search's log in the label: each candidate's median or skip reason).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/cases/conv_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"
#include "kernels/common/error.h"

namespace dlb::bench {
namespace {

// The user's shapes (bench/user_shapes.h) first, registered whatever the
// suite; then the default ones, where wanted, but those the user gave.
std::vector<std::pair<NamedConvShape, bool>> shapes_to_register() {
  std::vector<std::pair<NamedConvShape, bool>> shapes;
  const auto& user = user_shapes().conv;
  for (const ConvShape& shape : user) shapes.push_back({{"command line", shape}, true});
  if (own_shapes_wanted())
    for (const NamedConvShape& named : conv_default_shapes())
      if (std::none_of(user.begin(), user.end(),
                       [&](const ConvShape& s) { return s.descriptor() == named.shape.descriptor(); }))
        shapes.push_back({named, false});
  return shapes;
}

void register_conv(Config& config) {
  // Shape by shape, so that each shape's reference is computed once.
  for (const auto& [named, user] : shapes_to_register()) {
    std::optional<SuiteBypass> bypass;
    if (user) bypass.emplace();
    const ConvShape& p = named.shape;
    for (const ConvVariant* variant : variants_to_run(conv_variants(), config)) {
      if (!variant->accepts_problem(ConvArgs{p})) continue;
      const auto name = case_name("conv", variant->name,
                                  {{"n", p.n}, {"c", p.c}, {"h", p.h}, {"w", p.w}, {"k", p.k}, {"r", p.r},
                                   {"s", p.s}, {"stride", p.stride}, {"pad", p.pad}});
      add_case(name, variant->device, [variant, named = named](benchmark::State& state) {
        auto* c = validated_case<ConvCase>(state, *variant, named.shape);
        if (c == nullptr) return;
        // Compute-bound: no L2 flush between GPU calls.
        time_run(state, [c] { c->run(); }, c->context(), Timing{.flush_l2 = false});
        set_flops(state, c->flops_per_call());
        const ConvReport& report = c->report();
        std::string label = named.name;
        if (!report.implementation.empty()) label.append("; ").append(report.implementation);
        // gpu_cudnn_find: every candidate's median as its search timed it, or
        // why it was not timed, so one GPU run shows why it chose what it did.
        if (!report.search_log.empty()) label.append("; search: ").append(report.search_log);
        state.SetLabel(label);
        if (report.workspace_bytes >= 0) state.counters["workspace_bytes"] = report.workspace_bytes;
        if (report.search_seconds >= 0) state.counters["search_seconds"] = report.search_seconds;
      });
    }
  }
}

DLB_BENCH_FAMILY(register_conv,
                 "each convolution algorithm (direct, im2col, Winograd, FFT, the libraries') on the networks' layer "
                 "shapes, or any shape by --conv=");

}  // namespace
}  // namespace dlb::bench
