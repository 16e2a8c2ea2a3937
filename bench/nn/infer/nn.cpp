// <network>/<backend>/batch:<b>: a whole forward pass of resnet20,
// mnist_cnn and mnist_lenet with the committed Fashion-MNIST weights, on the
// real test images, for every backend of the network table (kernels/nn/infer/nn.h),
// at batch 1, 16, 64 and 256 (GPU backends also 1024), or, with
// --net=<network>/batch:B (bench/user_shapes.h), at batch B alone (with
// --suite given too: B and the suite's batches), every backend.
//
// Before timing, each case runs its backend over PyTorch's 256 reference
// images and compares the outputs with PyTorch's logits (max_rel_err); once
// per backend and network, the backend classifies the whole 10,000-image
// test set (in batches of 100) and a backend that disagrees with PyTorch's
// top-1 on more than kMaxDisagreements images (a reduced-precision row: more
// than max_disagreement_fraction of them) fails every case of it.
// Counters: items_per_second (images/s), flops (2 x MACs x batch per pass),
// accuracy, torch_disagreements (test images whose top-1 differs from
// PyTorch's), accuracy_drop (PyTorch's fp32 accuracy minus this row's),
// peak_bytes (NetCase::peak_bytes: what a pass holds),
// allocated_bytes_per_pass and allocations_per_pass (host heap allocations of
// the whole process during passes, alloc_counter.h; not in sanitizer
// builds), at batch 1 the p50/p90/p99 latency of single calls in
// microseconds (latency_p50_us ...), and where the pass goes: layer_us.<i>
// and layers_us (add_layer_times).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/alloc_counter.h"
#include "bench/cases/nn/infer/nn_case.h"
#include "bench/harness.h"
#include "bench/nn/infer/nn_layers.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kBatches[] = {1, 16, 64, 256};
constexpr std::int64_t kGpuBatches[] = {1, 16, 64, 256, 1024};
constexpr std::int64_t kAccuracyBatch = 100;  // divides the 10,000 test images
constexpr int kAllocPasses = 10;
// GPU batch-1 cases: at least this much time of single calls per repetition
// (a few hundred calls of resnet20), for their latency percentiles.
constexpr double kLatencyMinTime = 0.05;

// Passes of the per-layer profile each network case adds after its timing.
constexpr int kLayerPasses = 5;

// Where every row's pass goes, after the timing: layer_us.<i>, each layer's
// median over kLayerPasses passes issued layer by layer by the layer
// profile's timer (LayerTimer: CUDA events between the layer calls on a
// held stream on the GPU, the host clock on the CPU; for gpu_cudnn_graph the
// graph's calls one by one), and layers_us, their sum. The pass's own time
// minus layers_us is what the layers' boundaries cost inside a pass (launch
// gaps, or what a graph or a fused pass saves). A row whose calls are not
// one per layer (none today) gets none; gpu_onekernel stamps its own.
void add_layer_times(benchmark::State& state, const NetCase& c) {
  const std::size_t n = c.network().layers.size();
  if (c.report().layer_calls.size() != n) return;
  LayerTimer timer(c);
  std::vector<std::vector<double>> seconds(n);
  for (int p = 0; p < kLayerPasses; ++p) {
    const PassTimes t = timer.pass();
    for (std::size_t i = 0; i < n; ++i) seconds[i].push_back(t.layer_s[i]);
  }
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::sort(seconds[i].begin(), seconds[i].end());
    const double median = percentile(seconds[i], 0.5);
    state.counters["layer_us." + std::to_string(i)] = median * 1e6;
    sum += median;
  }
  state.counters["layers_us"] = sum * 1e6;
}

// Once per (network, backend) and process.
const NetAccuracy& accuracy_of(const nn::NetVariant& variant, std::string_view network) {
  static std::map<std::string, NetAccuracy> cache;
  const std::string key = std::string(network) + "/" + std::string(variant.name);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, NetCase(variant, network, kAccuracyBatch).accuracy()).first;
  return it->second;
}

void register_nn(Config& config) {
  for (const std::string_view network : nn::network_names()) {
    if (!own_shapes_wanted() && net_batches(network, {}).empty()) continue;  // not asked for: its files unread
    // The network, to ask each row whether it runs it; a file that cannot be
    // read lets every row register, and each case reports the error.
    const nn::Network* net = nullptr;
    std::string load_error;  // the network's files cannot be read: every case of it says why, bench exits 2
    try {
      net = &nn::network(network);
    } catch (const std::exception& e) {
      load_error = std::string(network) + ": " + e.what();
    }
    for (const nn::NetVariant* variant : variants_to_run(nn::network_variants(), config)) {
      if (net != nullptr && !variant->accepts_problem(nn::NetArgs{net})) continue;
      const std::span<const std::int64_t> batches =
          variant->device == Device::gpu ? std::span<const std::int64_t>(kGpuBatches) : kBatches;
      for (const auto& [batch, user] : net_batches(network, batches)) {
        std::optional<SuiteBypass> bypass;
        if (user) bypass.emplace();
        const auto name = case_name(network, variant->name, {{"batch", batch}});
        add_case(name, variant->device, [variant, network, batch = batch, name, load_error](benchmark::State& state) {
          if (!load_error.empty()) return report_input_error(state, load_error);
          auto* c = validated_case<NetCase>(state, *variant, network, batch);
          if (c == nullptr) return;
          write_trace(*variant, network, batch, name);
          const NetAccuracy& accuracy = accuracy_of(*variant, network);
          state.counters["accuracy"] = accuracy.accuracy;
          state.counters["torch_disagreements"] = static_cast<double>(accuracy.disagreements);
          state.counters["accuracy_drop"] = accuracy.drop();
          if (!accuracy.ok()) {
            state.SkipWithError(("accuracy: " + accuracy.summary()).c_str());
            return;
          }
          if (batch == 1) {
            // Single calls, each timed from the host until its result is
            // there (a GPU call synchronized): the single-stream latency view.
            std::vector<double> seconds;
            seconds.reserve(static_cast<std::size_t>(state.max_iterations));
            const MachineWatch watch;
            for (auto _ : state) {
              const auto start = std::chrono::steady_clock::now();
              c->run();
              c->context().synchronize();
              seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
              if (variant->device == Device::gpu) state.SetIterationTime(seconds.back());
            }
            if (variant->device == Device::cpu) watch.record(state);
            std::sort(seconds.begin(), seconds.end());
            for (const auto& [counter, q] : {std::pair{"latency_p50_us", 0.50}, {"latency_p90_us", 0.90},
                                             {"latency_p99_us", 0.99}})
              state.counters[counter] = percentile(seconds, q) * 1e6;
          } else {
            // Compute-bound: no L2 flush; a pass that waits for its stream
            // itself is timed without the stream hold.
            time_run(state, [c] { c->run(); }, c->context(),
                     Timing{.flush_l2 = false, .hold = !c->report().synchronizes});
          }
          state.SetItemsProcessed(state.iterations() * batch);
          set_flops(state, 2.0 * c->network().macs() * static_cast<double>(batch));
          if (std::isfinite(c->peak_bytes())) state.counters["peak_bytes"] = c->peak_bytes();
          if (alloc_counting()) {
            // What passes allocate (host heap, every library included), as
            // opposed to what one holds (peak_bytes): over kAllocPasses
            // passes after the timing, per pass.
            const AllocCounts before = alloc_counts();
            for (int i = 0; i < kAllocPasses; ++i) c->run();
            c->context().synchronize();
            const AllocCounts after = alloc_counts();
            state.counters["allocated_bytes_per_pass"] = static_cast<double>(after.bytes - before.bytes) / kAllocPasses;
            state.counters["allocations_per_pass"] = static_cast<double>(after.calls - before.calls) / kAllocPasses;
          }
          for (const auto& [counter, value] : c->report().counters) state.counters[counter] = value;
          // After the timing: what the row measures of itself (gpu_onekernel's
          // per-layer stamps), from passes of its own.
          bool own_layer_times = false;
          if (c->report().measured_counters)
            for (const auto& [counter, value] : c->report().measured_counters()) {
              state.counters[counter] = value;
              own_layer_times = own_layer_times || counter.starts_with("layer_us.");
            }
          if (!own_layer_times) add_layer_times(state, *c);
          state.SetLabel(c->report().implementation);
        },
        // Batch 1 on the GPU: latency percentiles need calls, not GPU time
        // (these are host-timed, with no flush: wall time is the measured time).
        CaseOptions{.min_time = batch == 1 ? kLatencyMinTime : 0.0});
      }
    }
  }
}

DLB_BENCH_FAMILY(register_nn,
                 "a whole forward pass of each network on each backend: images/s, latency at batch 1, memory, "
                 "accuracy against PyTorch's");

}  // namespace
}  // namespace dlb::bench
