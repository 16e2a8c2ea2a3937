// <network>_train/<impl>/batch:<b>/workers:<n>: the training step fed by the
// loader (LoadedTrainCase): each iteration takes the next batch of the
// epoch's permutation of the Fashion-MNIST training set (crop with padding
// 4, horizontal flip) from nn::BatchLoader and runs one step on it. workers
// 0: the batch is loaded in the calling thread before the step (PyTorch's
// DataLoader with num_workers=0); 1, 2: that many loader threads prepare
// batches ahead (two each) while the step runs (num_workers=1, 2). The
// step's own OpenMP threads are as many as without the loader: on a machine
// with as many cores as those, loader threads share the cores with them.
// Issue 35's breakdown per step.
//
// Counters: items_per_second (images/s), load_us (the mean time a step
// waited for its batch: the whole load at workers 0, what prefetching did
// not hide otherwise), forward_us, backward_us, optimizer_us (each phase's
// mean wall time per step), and the step's memory as the unloaded cases
// report it (bench/nn/train/train_memory.h) but for peak_measured_bytes: the step is
// the same, its measured peak is the unloaded case's (measuring it here
// would count the loader threads' allocations with it). Validated before
// timing (LoadedTrainCase: the loader's first batch bit for bit, the step's
// gradients on it). Not in the
// default suite; mnist_cnn only (the step's phases on their own are
// <net>_train/<impl>/batch:<b>, the loader's <net>_load/cpu/...).
#include <chrono>
#include <string>

#include "bench/cases/nn/train/loaded_train_case.h"
#include "bench/harness.h"
#include "bench/nn/train/train_memory.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/train_variants.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kBatches[] = {64, 256};
constexpr int kWorkers[] = {0, 1, 2};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void register_train_loaded(Config&) {
  for (const std::string_view network : {std::string_view("mnist_cnn")})
    for (const nn::TrainVariant& row : nn::train_variants())
      for (const std::int64_t batch : kBatches)
        for (const int workers : kWorkers) {
          if (!row.loader_cases) continue;
          const auto name =
              case_name(std::string(network) + "_train", row.name, {{"batch", batch}, {"workers", workers}});
          add_case(name, Device::cpu, [network, batch, &row, workers](benchmark::State& state) {
            if (const auto problem = nn::training_inputs_problem(network); !problem.empty())
              return report_input_error(state, problem);
            auto* c = validated_case<LoadedTrainCase>(state, network, batch, row, workers);
            if (c == nullptr) return;
            nn::TrainStep& step = c->step();
            const auto loader = c->loader();
            double load = 0, forward = 0, backward = 0, optimizer = 0;
            const MachineWatch watch;
            for (auto _ : state) {
              const double t0 = now();
              const nn::BatchLoader::Batch b = loader->next();
              const double t1 = now();
              step.forward(b.x, b.labels);
              const double t2 = now();
              step.backward();
              const double t3 = now();
              step.update();
              const double t4 = now();
              load += t1 - t0, forward += t2 - t1, backward += t3 - t2, optimizer += t4 - t3;
            }
            watch.record(state);
            const double steps = static_cast<double>(state.iterations());
            state.SetItemsProcessed(state.iterations() * batch);
            state.counters["load_us"] = load / steps * 1e6;
            state.counters["forward_us"] = forward / steps * 1e6;
            state.counters["backward_us"] = backward / steps * 1e6;
            state.counters["optimizer_us"] = optimizer / steps * 1e6;
            set_memory_counters(state, step.memory(), -1);  // the measured peak: the unloaded case's
            state.SetLabel("crop (pad 4) + flip, " + std::to_string(workers) + " loader workers, SGD momentum 0.9");
          });
        }
}

DLB_BENCH_FAMILY(register_train_loaded,
                 "the CPU training step fed by the loader: whether loader threads hide the loading behind the step");

}  // namespace
}  // namespace dlb::bench
