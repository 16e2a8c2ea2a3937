#include "bench/nn/train/train_memory.h"

#include <benchmark/benchmark.h>

#include "bench/alloc_counter.h"

namespace dlb::bench {

std::int64_t measured_step_peak(const nn::Network& net, std::int64_t batch, const nn::TrainVariant& row, const float* x,
                                const std::uint8_t* labels, int steps, nn::TrainMemory* accounted) {
  if (!alloc_counting()) return -1;
  const std::int64_t before = alloc_peak_restart();
  {
    const std::unique_ptr<nn::TrainStep> step = row.make(net, batch, nn::Sgd{});
    for (int i = 0; i < steps; ++i) step->step(x, labels);
    if (accounted != nullptr) *accounted = step->memory();
  }
  return alloc_peak_bytes() - before;
}

void set_memory_counters(benchmark::State& state, const nn::TrainMemory& m, std::int64_t measured) {
  state.counters["peak_bytes"] = static_cast<double>(m.total());
  state.counters["weights_bytes"] = static_cast<double>(m.weights);
  state.counters["activations_bytes"] = static_cast<double>(m.activations);
  state.counters["gradients_bytes"] = static_cast<double>(m.gradients);
  state.counters["optimizer_bytes"] = static_cast<double>(m.optimizer);
  state.counters["workspace_bytes"] = static_cast<double>(m.workspace);
  if (measured >= 0) state.counters["peak_measured_bytes"] = static_cast<double>(measured);
}

}  // namespace dlb::bench
