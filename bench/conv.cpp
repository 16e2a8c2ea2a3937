// conv/<variant>/n:../c:../h:../w:../k:../r:../s:../stride:../pad:..: every
// convolution variant on the default shapes (ResNet20 and MNIST CNN layers
// at batch 1 and 64, see conv_default_shapes), or, with
//     bench --conv=n64c16h32w32k16r3s3stride1pad1[,more descriptors]
// (the flag may also be repeated) on those shapes instead of the defaults.
// flops counts 2*n*k*oh*ow*c*r*s for every algorithm, so a Winograd or FFT
// variant that does fewer multiplications shows a higher rate. The label
// names the shape's origin and the implementation the library picked;
// cuDNN cases add workspace_bytes, gpu_cudnn_find its search_seconds.
#include <optional>
#include <string>
#include <vector>

#include "bench/cases/conv_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "kernels/common/error.h"

namespace dlb::bench {
namespace {

DLB_BENCH_FLAG(conv, "conv", "DESCRIPTOR[,DESCRIPTOR...]", "--conv=n64c16h32w32k16r3s3stride1pad1",
               "conv cases for these shapes instead of the default ones (fields n c h w k r s stride pad; "
               "required n c h k r); repeatable");

std::vector<NamedConvShape> shapes_from_flags(Config& config) {
  std::vector<NamedConvShape> shapes;
  for (std::string value = take_flag(config, "conv"); !value.empty(); value = take_flag(config, "conv"))
    for (const auto& shape : parse_conv_descriptors(value)) shapes.push_back({"command line", shape});
  return shapes;
}

void register_conv(Config& config) {
  auto shapes = shapes_from_flags(config);
  // Shapes the user named are registered whatever the suite.
  std::optional<SuiteBypass> bypass;
  if (!shapes.empty()) bypass.emplace();
  if (shapes.empty()) shapes = conv_default_shapes();
  // Shape by shape, so that each shape's reference is computed once.
  for (const auto& named : shapes) {
    const ConvShape& p = named.shape;
    for (const ConvVariant* variant : variants_to_run(conv_variants(), config)) {
      if (!variant->accepts_problem(ConvArgs{p})) continue;
      const auto name = case_name("conv", variant->name,
                                  {{"n", p.n}, {"c", p.c}, {"h", p.h}, {"w", p.w}, {"k", p.k}, {"r", p.r},
                                   {"s", p.s}, {"stride", p.stride}, {"pad", p.pad}});
      add_case(name, variant->device, [variant, named](benchmark::State& state) {
        auto* c = validated_case<ConvCase>(state, *variant, named.shape);
        if (c == nullptr) return;
        // Compute-bound: no L2 flush between GPU calls.
        time_run(state, [c] { c->run(); }, c->context(), Timing{.flush_l2 = false});
        set_flops(state, c->flops_per_call());
        const ConvReport& report = c->report();
        std::string label = named.name;
        if (!report.implementation.empty()) label.append("; ").append(report.implementation);
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
