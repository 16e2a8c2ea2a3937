// The training variant table: every implementation of the training step,
// CPU and GPU, listed once, as kNetworkVariants lists the inference
// backends (infer/nn.h). bench registers its cases from it
// (<network>_train/<name>/...: bench/nn/train/train.cpp, train_loaded.cpp,
// train_gpu.cpp), train_epoch takes its CPU rows' names (--impl), and the
// tests read it for the names, what a row needs and its bound; nothing else
// maps a name to an implementation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/variant.h"
#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_gpu.h"

namespace dlb::nn {

struct TrainVariant {
  // Stable, "<device>_<implementation>": the second part of the case name,
  // and train_epoch's --impl.
  std::string_view name;
  Device device;
  // The step this row makes (train.h's make_*_step for a CPU row,
  // GpuTrainStep with its launch for a GPU row); the other is null.
  std::unique_ptr<TrainStep> (*make)(const Network& net, std::int64_t batch, Sgd sgd) = nullptr;
  std::unique_ptr<GpuTrainStep> (*make_gpu)(const Network& net, std::int64_t batch, Sgd sgd,
                                            CUstream_st* stream) = nullptr;
  // The bound on its gradients against the double reference (train.h: the
  // analysis), for a network at a batch size.
  double (*tolerance)(const Network& net, std::int64_t batch) = nullptr;
  // What it needs of the network beyond what trainable_params accepts
  // (cpu_own: chains of stride-1 convolutions without batch-norm or joins);
  // nullptr: nothing. A network it does not take gets no case, and the
  // tests do not run it there (its step refuses it: dlb::Unsupported).
  bool (*accepts)(const Network& net) = nullptr;
  // The benchmark's label (a GPU case adds its copy mode and algorithms).
  std::string_view label;
  // Also registered fed by the loader (bench/nn/train/train_loaded.cpp:
  // <network>_train/<name>/batch:<b>/workers:<n>); CPU rows only.
  bool loader_cases = false;
  // Where set, a bound per trainable tensor (trainable_params order) no
  // wider than `tolerance` (train.h: cpu_onednn_wino's); else `tolerance`
  // for every tensor: tensor_tolerances.
  std::vector<double> (*tolerances)(const Network& net, std::int64_t batch) = nullptr;

  bool takes(const Network& net) const { return accepts == nullptr || accepts(net); }
  std::vector<double> tensor_tolerances(const Network& net, std::int64_t batch) const;
  // Whether the named network's description loads and this row does not
  // take it: what bench leaves unregistered. A network whose files cannot
  // be read is not refused (its cases report the missing file).
  bool refuses(std::string_view network) const;
};

using TrainVariantTable = std::span<const TrainVariant>;

// Every row this build has (oneDNN's under DLB_HAVE_ONEDNN, the GPU's under
// DLB_HAVE_CUDNN), CPU rows first.
TrainVariantTable train_variants();
// The row named `name` on `device`; throws dlb::Error naming the rows there
// are ("--impl is cpu_eigen, ... or cpu_own, not 'x'" with `what` "--impl").
const TrainVariant& train_variant(std::string_view name, Device device, std::string_view what);
// The row named `name` on any device (train_epoch's --impl); the error
// names every row.
const TrainVariant& train_variant(std::string_view name, std::string_view what);

// cpu_own's need: every conv of stride 1, without batch-norm or a residual join.
bool stride1_conv_chain(const Network& net);

}  // namespace dlb::nn
