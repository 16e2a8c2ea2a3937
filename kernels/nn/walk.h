// The walk through a network: one piece of code owns the loop over the
// layers in order, the activation buffers (one per layer output, allocated
// once, on the host or the device as the backend asks), each layer's input
// and residual, the per-layer calls that per-layer timing runs
// (NetReport::layer_calls) and the report. A backend supplies only what
// differs: one function per layer kind that prepares that layer on the
// buffers it is given and returns the call that runs it, and its
// implementation label. Adding a layer kind adds one function here and one
// in each backend that supports it. Internal to kernels/nn.
//
// The walked backends: cpu_own (and through it cpu_fakequant_s8's and
// gpu_hybrid_first_conv's CPU layers), cpu_eigen, gpu_own. The whole-graph
// backends (oneDNN with its layouts kept between layers, the cuDNN rows, the
// int8 rows) still chain their layers in their own prepare and hand the
// result to run_layers, the same seam the walk ends in.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/layers.h"

namespace dlb::nn {

// Where one layer reads and writes, in the walk's buffers (or the caller's x
// and y): its input, the output added before its ReLU (a conv's residual
// join; nullptr: none), its output.
struct LayerIo {
  const float* x = nullptr;
  const float* residual = nullptr;
  float* y = nullptr;
};

// What a backend supplies to the walk. Each function is called once per
// layer of its kind, in network order, at prepare time (it may allocate,
// pack weights, time kernel choices on the buffers), and returns the call
// that runs that layer alone on those buffers.
class LayerBackend {
 public:
  virtual ~LayerBackend() = default;
  virtual Run conv(const Layer& l, const LayerIo& io) = 0;
  virtual Run fc(const Layer& l, const LayerIo& io) = 0;
  virtual Run max_pool(const Layer& l, const LayerIo& io) = 0;
  virtual Run global_avg_pool(const Layer& l, const LayerIo& io) = 0;
  virtual Run log_softmax(const Layer& l, const LayerIo& io) = 0;
  // The report's implementation label, asked after the walk.
  virtual std::string implementation() const = 0;
};

// The backend's call for layer l: the one switch over LayerKind.
Run layer_call(LayerBackend& backend, const Layer& l, const LayerIo& io);

// The walked layers: the activation buffers and one call per layer, in
// network order (each keeps the buffers alive).
template <class Buffer>
struct WalkedLayers {
  std::shared_ptr<Activations<Buffer>> act;
  std::vector<Run> calls;
};

// `Buffer`: HostBuffer<float> or (GPU backends) DeviceBuffer<float>.
template <class Buffer>
WalkedLayers<Buffer> walk_layers(const NetArgs& args, LayerBackend& backend) {
  WalkedLayers<Buffer> walked{std::make_shared<Activations<Buffer>>(args), {}};
  const auto& layers = args.net->layers;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerIo io{walked.act->input(i), walked.act->residual(i), walked.act->output(i)};
    walked.calls.push_back([act = walked.act, call = layer_call(backend, layers[i], io)] { call(); });
  }
  return walked;
}

// The whole pass of a walked backend: its layers in sequence, reported
// (implementation and layer calls) into args.report.
template <class Buffer>
Run walk(const NetArgs& args, LayerBackend& backend) {
  WalkedLayers<Buffer> walked = walk_layers<Buffer>(args, backend);
  if (args.report != nullptr) args.report->implementation = backend.implementation();
  return run_layers(std::move(walked.calls), args.report);
}

// The pools of the host NCHW backends (cpu_own, cpu_eigen): max_pool_nchw and
// global_avg_pool_nchw at the batch size.
class HostNchwPools : public LayerBackend {
 public:
  explicit HostNchwPools(std::int64_t batch) : batch_(batch) {}
  Run max_pool(const Layer& l, const LayerIo& io) override {
    return [&l, batch = batch_, x = io.x, y = io.y] { max_pool_nchw(l, batch, x, y); };
  }
  Run global_avg_pool(const Layer& l, const LayerIo& io) override {
    return [&l, batch = batch_, x = io.x, y = io.y] { global_avg_pool_nchw(l, batch, x, y); };
  }

 protected:
  std::int64_t batch_;
};

}  // namespace dlb::nn
