// resnet20_testset/gpu_cudnn_<mode>/batch:256: the 10,000 Fashion-MNIST test
// images streamed through gpu_cudnn in batches, copies included, from
// pageable or pinned host memory, one batch at a time or two streams
// overlapping one batch's copies with the other's pass (bench/cases/
// nn_stream_case.h). Timed by the host's clock from the first copy until the
// last outputs are on the host; items_per_second = images/s of the whole
// loop. Validated first: the run's top-1 answers against PyTorch's, its
// logits of the reference images against PyTorch's. GPU only.
#include <chrono>

#include "bench/cases/nn/infer/nn_stream_case.h"
#include "bench/harness.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kBatch = 256;
constexpr std::string_view kNetwork = "resnet20";
constexpr std::string_view kBackend = "gpu_cudnn";

void register_nn_stream(Config& config) {
  std::string load_error;  // the network's files cannot be read: its cases say why, bench exits 2
  try {
    nn::network(kNetwork);
  } catch (const std::exception& e) {
    load_error = std::string(kNetwork) + ": " + e.what();
  }
  for (const nn::NetVariant* variant : variants_to_run(nn::network_variants(), config)) {
    if (variant->name != kBackend) continue;
    for (const StreamMode& mode : stream_modes()) {
      std::string name = std::string(variant->name).append("_").append(mode.name);
      add_case(case_name(std::string(kNetwork) + "_testset", name, {{"batch", kBatch}}), variant->device,
               [variant, mode, load_error](benchmark::State& state) {
                 if (!load_error.empty()) return report_input_error(state, load_error);
                 // Set up and validated once, reused by every call of the body
                 // (a whole test-set pass each: validated_case).
                 auto* c = validated_case<NetStreamCase>(state, *variant, kNetwork, kBatch, mode);
                 if (c == nullptr) return;
                 state.counters["accuracy"] = c->accuracy().accuracy;
                 if (!c->accuracy().ok()) {
                   state.SkipWithError(("accuracy: " + c->accuracy().summary()).c_str());
                   return;
                 }
                 for (auto _ : state) {
                   const auto start = std::chrono::steady_clock::now();
                   c->run();
                   state.SetIterationTime(
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
                 }
                 state.SetItemsProcessed(state.iterations() * c->images());
                 set_flops(state, 2.0 * c->network().macs() * static_cast<double>(c->images()));
               });
    }
  }
}

DLB_BENCH_FAMILY(register_nn_stream,
                 "the whole test set streamed through the GPU, copies included: how much of the copying overlap "
                 "hides (GPU only)");

}  // namespace
}  // namespace dlb::bench
