// <network>_train/<impl>/batch:<b>/h2d:<mode>: one GPU training step
// (kernels/nn/train/train_gpu.h: cuDNN convolutions, cuBLAS fc, own kernels, SGD
// with momentum), its calls launched one by one (impl gpu_cudnn) or each
// phase (forward, backward, update) replayed from a CUDA graph
// (gpu_cudnn_graph, as the inference rows' gpu_cudnn_graph), of resnet20
// (batch-norm in training mode, as the CPU cases), mnist_cnn and
// mnist_lenet from the committed weights, on
// the first <b> Fashion-MNIST training images, at batch 64 and 256, with
// the batch copied from the host every step (GpuTrainCase): h2d:pageable
// (from pageable memory, before the step), h2d:pinned (from page-locked
// memory, before the step), h2d:overlap (page-locked, the next batch on a
// second stream while the step runs). GPU only: nothing is registered
// without a device. With --net=<network>_train/batch:B
// (bench/user_shapes.h): batch B alone (with --suite given too: B and the
// suite's batches), every impl and copy mode.
//
// Validated before timing (gradients against the double reference, the
// loss against its fp32 bound). Each iteration is one step, timed by CUDA
// events on the step's stream from before the copy (or the wait for it) to
// after the update: what a training loop waits for per batch, the host's
// issuing of the step included (as PyTorch's steps are timed by the peers).
// No L2 flush: a step's weights stay in L2 from one step to the next, as in
// training. Counters: items_per_second (images/s), flops (as the CPU
// cases), per step h2d_us (the copy itself: on the second stream for
// overlap), h2d_exposed_us (what of it the step's stream waited for),
// forward_us (the loss included), backward_us, optimizer_us (eager rows:
// gpu_cudnn_graph's step is one graph launch with no marks inside, and its
// profile's counters below split it); peak_bytes
// (the step's own device buffers and the input buffers, by their own
// accounting) and its split weights_bytes, activations_bytes (outputs kept
// for backward, pool routes, log-probabilities, per-row losses, batch-norm's
// statistics), gradients_bytes, optimizer_bytes (momentum), workspace_bytes
// (backward's gradient buffers, batch-norm's slice sums and the largest cuDNN workspace), input_bytes (one
// device batch, two for overlap); measured_device_bytes (the peak of the
// process's own device allocations from setting the case up to the end of
// its validation step, kernels/common/device_bytes.h: the same and the
// search's temporary workspaces; not the library handles' insides). The label names the cuDNN
// algorithms chosen.
//
// Where the step's time goes: after the timed loop (never inside it),
// kProfileSteps more steps launched call by call (graph rows too: a graph
// has no marks) with the stream held while each is enqueued and a CUDA
// event at each of the plan's marks (GpuTrainCase::profile); counters
// layer_us.<i>.<part> (the median over the steps of layer i's forward,
// batch_norm, backward_data, batch_norm_backward, backward_weights: the
// parts train_plan.h's TrainPart lists), update_us, profiled_us (their
// sum per step, median) and profile_steps. docs/training.md says what
// each part holds.
#include <optional>
#include <string>

#include "bench/cases/nn/train/train_gpu_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/train_variants.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kBatches[] = {64, 256};
constexpr H2d kModes[] = {H2d::pageable, H2d::pinned, H2d::overlap};
// The networks the step supports (nn::trainable_params accepts them).
constexpr std::string_view kTrainable[] = {"resnet20", "mnist_cnn", "mnist_lenet"};
// Event time a repetition accumulates: 50-200 steps of 0.3-1 ms (estimated,
// unmeasured), rather than --gpu_min_time's handful.
constexpr double kMinTime = 0.05;
// Profiled steps after the timed loop (about 3-50 ms of event time in all,
// estimated).
constexpr int kProfileSteps = 11;

void register_train_gpu(Config& config) {
  if (!config.gpu && !config.name_only) return;
  for (const std::string_view network : kTrainable)
    for (const nn::TrainVariant& row : nn::train_variants())
    for (const auto& [batch, user] : net_batches(std::string(network) + "_train", kBatches))
      for (const H2d mode : kModes) {
        if (row.device != Device::gpu || row.refuses(network)) continue;
        std::optional<SuiteBypass> bypass;
        if (user) bypass.emplace();
        const auto name = case_name(std::string(network) + "_train", row.name, {{"batch", batch}}) + "/h2d:" +
                          h2d_name(mode);
        add_case(
            name, Device::gpu,
            [network, batch = batch, mode, &row](benchmark::State& state) {
              if (const auto problem = nn::training_inputs_problem(network); !problem.empty())
                return report_input_error(state, problem);
              auto* c = validated_case<GpuTrainCase>(state, network, batch, mode, row);
              if (c == nullptr) return;
              // Warm-up: the update's first launch, and (gpu_cudnn_graph) the
              // graphs' captures, for both input buffers of overlap.
              c->run();
              c->run();
              GpuTrainCase::Times sum;
              for (auto _ : state) {
                const GpuTrainCase::Times t = c->run();
                state.SetIterationTime(t.total);
                sum.h2d += t.h2d, sum.h2d_exposed += t.h2d_exposed, sum.forward += t.forward;
                sum.backward += t.backward, sum.optimizer += t.optimizer, sum.phases = t.phases;
              }
              const double steps = static_cast<double>(state.iterations());
              state.SetItemsProcessed(state.iterations() * batch);
              set_flops(state, c->flops_per_step());
              state.counters["h2d_us"] = sum.h2d / steps * 1e6;
              state.counters["h2d_exposed_us"] = sum.h2d_exposed / steps * 1e6;
              if (sum.phases) {  // one graph launch has no phases to time: the profile splits it
                state.counters["forward_us"] = sum.forward / steps * 1e6;
                state.counters["backward_us"] = sum.backward / steps * 1e6;
                state.counters["optimizer_us"] = sum.optimizer / steps * 1e6;
              }
              for (const auto& [counter, value] : c->profile(kProfileSteps)) state.counters[counter] = value;
              const nn::TrainMemory m = c->step().memory();
              state.counters["peak_bytes"] = static_cast<double>(m.total() + c->input_bytes());
              state.counters["weights_bytes"] = static_cast<double>(m.weights);
              state.counters["activations_bytes"] = static_cast<double>(m.activations);
              state.counters["gradients_bytes"] = static_cast<double>(m.gradients);
              state.counters["optimizer_bytes"] = static_cast<double>(m.optimizer);
              state.counters["workspace_bytes"] = static_cast<double>(m.workspace);
              state.counters["input_bytes"] = static_cast<double>(c->input_bytes());
              state.counters["measured_device_bytes"] = static_cast<double>(c->measured_bytes());
              state.SetLabel(std::string(row.label) + ", h2d " + h2d_name(mode) + ", SGD momentum 0.9; " +
                             c->step().algorithms());
            },
            CaseOptions{.min_time = kMinTime});
      }
}

DLB_BENCH_FAMILY(register_train_gpu,
                 "one GPU training step (cuDNN, eager or CUDA graphs) with the batch copied from the host three "
                 "ways (GPU only)");

}  // namespace
}  // namespace dlb::bench
