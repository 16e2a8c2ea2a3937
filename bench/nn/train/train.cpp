// <network>_train/<impl>/batch:<b>: one training step (kernels/nn/train/train.h:
// forward, cross-entropy loss, backward, SGD with momentum) of each network
// the step supports (resnet20, with batch-norm in training mode; mnist_cnn,
// mnist_lenet), from the committed weights, on the first <b> Fashion-MNIST
// training images, at batch 64 and 256. Each iteration is one
// step on the same batch (the parameters move as training would). <impl>:
// every CPU row of the training table (kernels/nn/train/train_variants.h):
// cpu_eigen (the im2col step's GEMMs by Eigen) and, in builds with oneDNN,
// cpu_onednn_sgemm (the same step, its GEMMs by oneDNN's sgemm) and
// cpu_onednn (oneDNN's training primitives for every layer:
// kernels/nn/train/train_onednn.cpp), cpu_onednn_wino (the same, each 3x3
// stride-1 conv's directions on oneDNN's Winograd where it times faster);
// cpu_own (every convolution's forward,
// backward-data and backward-weights on the own direct kernel, the fc GEMMs
// on Eigen; chains of stride-1 convolutions: mnist_cnn and mnist_lenet), each
// on the networks its row takes.
//
// Before timing, the case's gradients are checked against the double
// reference (TrainCase::validate). Counters: items_per_second (images/s),
// flops (TrainCase::flops_per_step), forward_us, backward_us, optimizer_us
// (each phase's mean wall time per step), peak_bytes (what the step holds,
// by its own accounting: TrainStep::memory, all allocated before the first
// step) and its split weights_bytes, activations_bytes (outputs kept for
// backward, pool indices, batch-norm's inputs and statistics,
// log-probabilities), gradients_bytes,
// optimizer_bytes (momentum), workspace_bytes (bench/nn/train/train_memory.h);
// peak_measured_bytes (the host heap's live bytes at their peak above where
// they stood, while a fresh step is built and runs two steps:
// measured_step_peak) and allocated_bytes_per_step (host heap, the whole
// process, alloc_counter.h); neither in sanitizer builds. After the timed
// loop, the step's profile (TrainStep::profile, kProfileSteps steps): each
// call of the training walk timed alone, layer_us.<i>.<direction>
// (forward, backward, backward_weights, backward_data: train_walk.h; the
// loss as the layer after the logits), update_us, profiled_us (their sum)
// and profile_steps, the same names as the GPU rows'; for oneDNN's steps,
// winograd_primitives (how many of its primitives run Winograd, oneDNN's
// or the own).
//
// With --net=<network>_train/batch:B (bench/user_shapes.h): the step at
// batch B alone (with --suite given too: B and the suite's batches), every
// impl; the GPU's are train_gpu.cpp's.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/alloc_counter.h"
#include "bench/cases/nn/train/train_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "bench/nn/train/train_memory.h"
#include "bench/user_shapes.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/train_variants.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kTrainBatches[] = {64, 256};
constexpr int kAllocSteps = 3;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The networks the step supports (nn::trainable_params accepts them;
// test_train checks the list), registered whether or not their files can be
// read: a missing weights file or data set is reported as bad input (bench
// exits 2 naming it), as the network cases do.
constexpr std::string_view kTrainable[] = {"resnet20", "mnist_cnn", "mnist_lenet"};
// Steps a CPU case's profile takes the median of: three keeps it to about a
// second for resnet20 at batch 256 on two cores.
constexpr int kProfileSteps = 3;

void register_train(Config&) {
  for (const std::string_view network : kTrainable) {
    for (const nn::TrainVariant& row : nn::train_variants())
    for (const auto& [batch, user] : net_batches(std::string(network) + "_train", kTrainBatches)) {
      if (row.device != Device::cpu || row.refuses(network)) continue;
      std::optional<SuiteBypass> bypass;
      if (user) bypass.emplace();
      const auto name = case_name(std::string(network) + "_train", row.name, {{"batch", batch}});
      add_case(name, Device::cpu, [network, batch = batch, &row](benchmark::State& state) {
        if (const auto problem = nn::training_inputs_problem(network); !problem.empty())
          return report_input_error(state, problem);
        auto* c = validated_case<TrainCase>(state, network, batch, row);
        if (c == nullptr) return;
        nn::TrainStep& step = c->step();
        double forward = 0, backward = 0, optimizer = 0;
        const MachineWatch watch;
        for (auto _ : state) {
          const double t0 = now();
          step.forward(c->x(), c->labels());
          const double t1 = now();
          step.backward();
          const double t2 = now();
          step.update();
          const double t3 = now();
          forward += t1 - t0, backward += t2 - t1, optimizer += t3 - t2;
        }
        watch.record(state);
        const double steps = static_cast<double>(state.iterations());
        state.SetItemsProcessed(state.iterations() * batch);
        set_flops(state, c->flops_per_step());
        state.counters["forward_us"] = forward / steps * 1e6;
        state.counters["backward_us"] = backward / steps * 1e6;
        state.counters["optimizer_us"] = optimizer / steps * 1e6;
        set_memory_counters(state, step.memory(),
                            measured_step_peak(c->network(), batch, row, c->x(), c->labels()));
        if (alloc_counting()) {
          const AllocCounts before = alloc_counts();
          for (int i = 0; i < kAllocSteps; ++i) step.step(c->x(), c->labels());
          const AllocCounts after = alloc_counts();
          state.counters["allocated_bytes_per_step"] = static_cast<double>(after.bytes - before.bytes) / kAllocSteps;
        }
        // Where the step's time goes, after the timed loop: each of the
        // walk's calls timed alone (layer_us.<i>.<direction>), as the GPU
        // rows report theirs.
        for (const auto& [counter, value] : step.profile(c->x(), c->labels(), kProfileSteps))
          state.counters[counter] = value;
        // How many of the step's primitives run Winograd, oneDNN's or the
        // own (cpu_onednn_wino picks per conv and direction).
        if (const auto kernels = step.kernels(); !kernels.empty()) {
          int winograd = 0;
          for (const auto& k : kernels)
            winograd += k.find("wino") != std::string::npos || k.find("Winograd") != std::string::npos;
          state.counters["winograd_primitives"] = winograd;
        }
        state.SetLabel(std::string(row.label));
      });
    }
  }
}

// <network>_load/cpu/batch:<b>/threads:<t>: the data-loading phase alone
// (LoadCase: batches of an epoch's permutation of the training set, random
// crop with padding 4 and horizontal flip, into the float batch), on t
// loader threads (0: the calling thread, as PyTorch's num_workers=0).
// Counters: items_per_second (images/s), bytes_per_second (the float batch
// written).
constexpr int kLoaderThreads[] = {0, 1, 2};

void register_load(Config&) {
  for (const std::string_view network : {std::string_view("mnist_cnn")}) {
    for (const std::int64_t batch : kTrainBatches)
      for (const int threads : kLoaderThreads) {
        const auto name = case_name(std::string(network) + "_load", "cpu", {{"batch", batch}, {"threads", threads}});
        add_case(name, Device::cpu, [network, batch, threads](benchmark::State& state) {
          if (const auto problem = nn::training_inputs_problem(network); !problem.empty())
          return report_input_error(state, problem);
          auto* c = validated_case<LoadCase>(state, network, batch, threads);
          if (c == nullptr) return;
          const MachineWatch watch;
          for (auto _ : state) c->run();
          watch.record(state);
          state.SetItemsProcessed(state.iterations() * batch);
          set_bytes(state, static_cast<double>(batch * nn::network(network).in_size()) * sizeof(float));
          state.SetLabel("crop (pad 4) + flip, " + std::to_string(threads) + " loader threads");
        });
      }
  }
}

DLB_BENCH_FAMILY(register_train,
                 "one training step (forward, loss, backward, SGD) per CPU implementation: images/s, phase times, "
                 "memory");
DLB_BENCH_FAMILY(register_load,
                 "the training data loader alone (crop, flip, into the batch) on 0 to 2 loader threads: images/s");

}  // namespace
}  // namespace dlb::bench
