// The walk through a network: one piece of code owns the loop over the
// layers in order, what each layer reads (its input, its residual), the
// per-layer calls that per-layer timing runs (NetReport::layer_calls) and the
// report. A backend supplies only what differs: one function per layer kind
// that prepares that layer and returns the call that runs it, its
// implementation label, and (where it runs the pass otherwise than as its
// layer calls in sequence) the whole pass. by_kind (network.h) is the one
// switch over LayerKind; adding a layer kind adds its function to each
// backend that supports it. Internal to kernels/nn.
//
// Two seams, one loop each:
//   LayerBackend + walk: the walk also owns the activations, one buffer per
//     layer output (NCHW fp32, on the host or the device as the backend
//     asks), and hands each layer its x, residual and y. cpu_own,
//     cpu_eigen, gpu_own, gpu_cudnn and gpu_cudnn_graph; cpu_fakequant_s8
//     and gpu_hybrid_first_conv are cpu_own's layers with work around each
//     call (AroundLayers).
//   GraphBackend<Value> + walk_graph: the whole-graph backends, whose
//     activations are their own (layouts kept between layers, data types,
//     quantization parameters): a layer is handed the Values its input and
//     residual left and returns its own output's Value with its call.
//     cpu_onednn (and its ownwino, bf16, mixed_bf16 rows), cpu_onednn_s8,
//     cpu_own_s8, cpu_own_pertensor_s8, gpu_own_s8, gpu_own_mma_s8,
//     gpu_cublaslt_s8 (and their host twins), gpu_cudnn_f16, gpu_cudnn_bf16,
//     gpu_cudnn_mixed_f16, gpu_cudnn_fused, gpu_cudnn_fused_f16.
// Both end in PassBackend::pass: the layer calls in sequence, or the
// backend's own pass over them (gpu_cudnn_graph's one CUDA graph). The
// one-kernel GPU pass belongs here too (its kernel as the pass, its layer
// calls each layer alone for the per-layer profile), but gpu_onekernel still
// builds its program from the Network itself, off both seams: not moved yet.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/infer/layers.h"

namespace dlb::nn {

// What every walked backend supplies besides its layers.
class PassBackend {
 public:
  virtual ~PassBackend() = default;
  // The report's implementation label, asked after the walk.
  virtual std::string implementation() const = 0;
  // The whole pass from the layer calls (which the walk reports as they
  // are): by default they in sequence.
  virtual Run pass(std::vector<Run> calls) { return run_layers(std::move(calls), nullptr); }
};

// The end of every walk: the report (implementation, layer calls) and the pass.
inline Run end_walk(std::vector<Run> calls, PassBackend& backend, NetReport* report) {
  if (report != nullptr) {
    report->implementation = backend.implementation();
    report->layer_calls = calls;
  }
  return backend.pass(std::move(calls));
}

// Where one layer reads and writes, in the walk's buffers (or the caller's x
// and y): its place in the network, its input, the output added before its
// ReLU (a conv's residual join; nullptr: none), its output.
struct LayerIo {
  std::size_t index = 0;
  const float* x = nullptr;
  const float* residual = nullptr;
  float* y = nullptr;
};

// What a backend on the walk's buffers supplies. Each function is called
// once per layer of its kind, in network order, at prepare time (it may
// allocate, pack weights, time kernel choices on the buffers), and returns
// the call that runs that layer alone on those buffers.
class LayerBackend : public PassBackend {
 public:
  virtual Run conv(const Layer& l, const LayerIo& io) = 0;
  virtual Run fc(const Layer& l, const LayerIo& io) = 0;
  virtual Run max_pool(const Layer& l, const LayerIo& io) = 0;
  virtual Run global_avg_pool(const Layer& l, const LayerIo& io) = 0;
  virtual Run log_softmax(const Layer& l, const LayerIo& io) = 0;
};

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
    const LayerIo io{i, walked.act->input(i), walked.act->residual(i), walked.act->output(i)};
    walked.calls.push_back([act = walked.act, call = by_kind(backend, layers[i], io)] { call(); });
  }
  return walked;
}

// The whole pass of a backend on the walk's buffers, reported into args.report.
template <class Buffer>
Run walk(const NetArgs& args, LayerBackend& backend) {
  WalkedLayers<Buffer> walked = walk_layers<Buffer>(args, backend);
  return end_walk(std::move(walked.calls), backend, args.report);
}

// A backend that runs another's layers with work of its own around each
// call (cpu_fakequant_s8's rounding, gpu_hybrid_first_conv's GPU convs and
// copies): around() makes a layer's call from the inner backend's.
class AroundLayers : public LayerBackend {
 public:
  explicit AroundLayers(std::unique_ptr<LayerBackend> inner) : inner_(std::move(inner)) {}
  Run conv(const Layer& l, const LayerIo& io) override { return around(l, io, inner_->conv(l, io)); }
  Run fc(const Layer& l, const LayerIo& io) override { return around(l, io, inner_->fc(l, io)); }
  Run max_pool(const Layer& l, const LayerIo& io) override { return around(l, io, inner_->max_pool(l, io)); }
  Run global_avg_pool(const Layer& l, const LayerIo& io) override {
    return around(l, io, inner_->global_avg_pool(l, io));
  }
  Run log_softmax(const Layer& l, const LayerIo& io) override { return around(l, io, inner_->log_softmax(l, io)); }

 protected:
  virtual Run around(const Layer& l, const LayerIo& io, Run call) = 0;
  const LayerBackend& inner() const { return *inner_; }

 private:
  std::unique_ptr<LayerBackend> inner_;
};

// cpu_own's layers (nn_cpu_own.cpp), for the backends that run some layers
// on the CPU: host NCHW buffers at the batch size.
std::unique_ptr<LayerBackend> own_cpu_layers(std::int64_t batch, const Exec& exec);

// What a whole-graph backend's layer is handed: its place in the network,
// the Value its input left (the network input's for the first layer) and
// its residual's (nullptr: none).
template <class Value>
struct GraphIo {
  std::size_t index = 0;
  const Value& x;
  const Value* residual = nullptr;
};

// What it returns: its output's Value, which the layers that read it are
// handed, and the call that runs it alone.
template <class Value>
struct GraphOut {
  Value y;
  Run call;
};

// A backend that keeps its own activations between layers. Each function
// is called once per layer of its kind, in network order, at prepare time.
template <class Value>
class GraphBackend : public PassBackend {
 public:
  using Io = GraphIo<Value>;
  using Out = GraphOut<Value>;
  virtual Out conv(const Layer& l, const Io& io) = 0;
  virtual Out fc(const Layer& l, const Io& io) = 0;
  virtual Out max_pool(const Layer& l, const Io& io) = 0;
  virtual Out global_avg_pool(const Layer& l, const Io& io) = 0;
  virtual Out log_softmax(const Layer& l, const Io& io) = 0;
  // After the last layer, with its output: where the backend delivers it
  // into the caller's y itself (oneDNN's reorder out of a blocked layout).
  virtual void finish(const Value& /*result*/) {}
};

// The whole pass of a whole-graph backend, from `input` (the network
// input's Value), reported into args.report.
template <class Value>
Run walk_graph(const NetArgs& args, GraphBackend<Value>& backend, const Value& input) {
  const auto& layers = args.net->layers;
  std::vector<Value> out;  // per layer, its output's Value
  out.reserve(layers.size());
  std::vector<Run> calls;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const auto at = [&](int layer) { return &out[static_cast<std::size_t>(layer)]; };
    const GraphIo<Value> io{i, l.input < 0 ? input : *at(l.input), l.residual < 0 ? nullptr : at(l.residual)};
    GraphOut<Value> step = by_kind(backend, l, io);
    out.push_back(std::move(step.y));
    calls.push_back(std::move(step.call));
  }
  backend.finish(out.back());
  return end_walk(std::move(calls), backend, args.report);
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
