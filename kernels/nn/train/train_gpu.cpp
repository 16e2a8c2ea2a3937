// The GPU training step (train_gpu.h): train_plan.h's schedule on cuDNN,
// cuBLAS and the own kernels of train_gpu_kernels.cu.
#include "kernels/nn/train/train_gpu.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/cudnn_resources.h"
#include "kernels/common/device_bytes.h"
#include "kernels/common/stream_hold.h"
#include "kernels/conv/conv_cudnn.h"
#include "kernels/nn/train/train_gpu_kernels.h"
#include "kernels/nn/train/train_plan.h"

// The legacy convolution API is deprecated in cuDNN 9 but is what frameworks'
// algorithm choice exposes: see cudnn_resources.h.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace dlb::nn {
namespace {

bool tensor_op(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// One candidate of a backward search, as cuDNN's heuristic lists it.
struct Candidate {
  int algo;
  cudnnStatus_t status;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
};

// The algorithms cuDNN lists for one direction (its *_v7 query, `Perf` its
// result type), as candidates for search_backward.
template <class Perf, class MaxCount, class List>
std::vector<Candidate> candidates(MaxCount max_count, List list) {
  int count = 0, returned = 0;
  DLB_CUDNN_CHECK(max_count(&count));
  std::vector<Perf> perf(static_cast<std::size_t>(count));
  DLB_CUDNN_CHECK(list(count, &returned, perf.data()));
  std::vector<Candidate> out;
  for (int k = 0; k < returned; ++k) {
    const Perf& r = perf[static_cast<std::size_t>(k)];
    out.push_back({static_cast<int>(r.algo), r.status, r.determinism, r.mathType});
  }
  return out;
}

// The fastest of `listed` that runs and keeps the fp32 bound (the rules
// below: search_backward).
int search_backward_among(const char* what, const std::vector<Candidate>& listed, int winograd_nonfused, int window,
                          cudaStream_t stream, const std::function<cudnnStatus_t(int, std::size_t*)>& bytes,
                          const std::function<cudnnStatus_t(int, void*, std::size_t)>& run) {
  std::size_t free_bytes = 0, total_bytes = 0;
  DLB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  bool found = false;
  int best = 0;
  double best_seconds = 0.0;
  std::vector<int> seen;
  for (const Candidate& c : listed) {
    if (c.status != CUDNN_STATUS_SUCCESS || tensor_op(c.math)) continue;
    if (c.algo == winograd_nonfused && window != 3) continue;
    if (std::find(seen.begin(), seen.end(), c.algo) != seen.end()) continue;
    seen.push_back(c.algo);
    std::size_t need = 0;
    if (cudnn_not_supported(bytes(c.algo, &need))) continue;
    if (need > free_bytes / 2) continue;
    DeviceBuffer<unsigned char> workspace(need);
    const auto call = [&] { return run(c.algo, workspace.data(), need); };
    const cudnnStatus_t first = call();
    if (cudnn_not_supported(first)) continue;
    detail::check_cudnn(first, what, __FILE__, __LINE__);
    DLB_CUDNN_CHECK(call());
    // Timed as a case times a call (the stream held while it is enqueued),
    // as the forward search times its candidates.
    const double seconds = cudnn_median_seconds(stream, call);
    if (!found || seconds < best_seconds) found = true, best = c.algo, best_seconds = seconds;
  }
  if (!found)
    throw Unsupported(std::string(what) + ": no strict-fp32 cuDNN algorithm runs this problem");
  return best;
}

// The fastest candidate that keeps the fp32 bound, timed on the step's own
// buffers: listed as supported, no tensor-op (TF32) math, deterministic
// (ALGO_0 and the filter's ALGO_3 sum with atomics in an order that changes
// from run to run: the gradients of the timed steps would not be those
// validated), and not the nonfused Winograd on a filter other than 3x3
// (cudnn_fp32_tolerance's rule for the forward: its 5x5 transform rounds
// far more). bytes(algo) gives the workspace (or not_supported), run(algo,
// workspace, bytes) one call. Where no deterministic algorithm runs the
// problem, the non-deterministic ones are searched (their sums keep the
// same bound, whose size does not depend on the order) and `deterministic`
// says so. dlb::Unsupported if none runs.
int search_backward(const char* what, const std::vector<Candidate>& listed, int winograd_nonfused, int window,
                    cudaStream_t stream, const std::function<cudnnStatus_t(int, std::size_t*)>& bytes,
                    const std::function<cudnnStatus_t(int, void*, std::size_t)>& run, bool& deterministic) {
  for (const bool strict : {true, false}) {
    std::vector<Candidate> kept;
    for (const Candidate& c : listed)
      if (!strict || c.determinism == CUDNN_DETERMINISTIC) kept.push_back(c);
    try {
      deterministic = strict;
      return search_backward_among(what, kept, winograd_nonfused, window, stream, bytes, run);
    } catch (const Unsupported&) {
      if (!strict) throw;
    }
  }
  throw Unsupported(std::string(what) + ": no strict-fp32 cuDNN algorithm runs this problem");
}

struct ConvDescs {
  ConvDescs(const Layer& l, std::int64_t n)
      : x(cudnn_dim(n), cudnn_dim(l.c), cudnn_dim(l.h), cudnn_dim(l.w)),
        w(cudnn_dim(l.k), cudnn_dim(l.c), cudnn_dim(l.window), cudnn_dim(l.window)),
        conv(cudnn_dim(l.pad), cudnn_dim(l.pad), cudnn_dim(l.stride), cudnn_dim(l.stride), CUDNN_FMA_MATH),
        y(cudnn_dim(n), cudnn_dim(l.k), cudnn_dim(l.oh), cudnn_dim(l.ow)) {}
  CudnnTensorDesc x;
  CudnnFilterDesc w;
  CudnnConvolutionDesc conv;
  CudnnTensorDesc y;
  cudnnConvolutionFwdAlgo_t fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
};

std::string bwd_data_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "unknown";
  }
}

std::string bwd_filter_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "unknown";
  }
}

// A phase's graphs, one per input it was given.
struct PhaseGraphs {
  std::vector<std::pair<std::pair<const float*, const std::uint8_t*>, std::unique_ptr<CudaGraph>>> by_input;
  // Launches the graph of this input. The first call for an input runs the
  // phase's calls one by one instead (lazy module loading and cuDNN's and
  // cuBLAS's first-call set-up happen there, outside any capture, as
  // gpu_cudnn_graph does for inference), waits for them, and captures them
  // for the calls that follow (a capture records; it runs nothing).
  void run(cudaStream_t stream, const float* x, const std::uint8_t* labels, const std::function<void()>& record) {
    const auto key = std::make_pair(x, labels);
    for (const auto& [k, g] : by_input)
      if (k == key) return g->launch(stream);
    record();
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    by_input.emplace_back(key, std::make_unique<CudaGraph>(stream, record));
  }
};

}  // namespace

struct GpuTrainStep::Impl final : TrainOps {
  Impl(const Network& net, std::int64_t batch, Sgd s, cudaStream_t st, GpuLaunch how)
      : watch(std::make_unique<DeviceBytePeak>()), plan(net, batch), sgd(s), stream(st), launch(how), cudnn(st), cublas(st) {
    DLB_REQUIRE(stream != nullptr, "GPU training step: no CUDA stream");
    DLB_CUBLAS_CHECK(cublasSetMathMode(cublas.get(), CUBLAS_PEDANTIC_MATH));
    const auto p = static_cast<std::size_t>(plan.param_floats());
    params = DeviceBuffer<float>(p);
    grads = DeviceBuffer<float>(p);
    velocity = DeviceBuffer<float>(p);
    acts = DeviceBuffer<float>(static_cast<std::size_t>(plan.act_floats()));
    routes = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(plan.route_bytes()));
    loss_rows = DeviceBuffer<double>(static_cast<std::size_t>(batch));
    dbuf = DeviceBuffer<float>(static_cast<std::size_t>(plan.dbuf_count() * plan.dbuf_floats()));
    bn = DeviceBuffer<float>(static_cast<std::size_t>(plan.bn_floats()));
    running = DeviceBuffer<float>(static_cast<std::size_t>(plan.running_floats()));
    bn_parts = DeviceBuffer<double>(static_cast<std::size_t>(plan.bn_part_doubles()));
    // Zeros everywhere (the padding between tensors stays zero), then the parameters.
    for (auto* b : {&grads, &velocity, &acts, &dbuf, &bn})
      DLB_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), stream));
    DLB_CUDA_CHECK(cudaMemsetAsync(routes.data(), 0, routes.bytes(), stream));
    const std::vector<float> initial = plan.initial_params();
    DLB_CUDA_CHECK(cudaMemcpyAsync(params.data(), initial.data(), params.bytes(), cudaMemcpyHostToDevice, stream));
    const std::vector<float> initial_running = plan.initial_running();
    DLB_CUDA_CHECK(cudaMemcpyAsync(running.data(), initial_running.data(), running.bytes(), cudaMemcpyHostToDevice,
                                   stream));
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    arenas = {params.data(), grads.data(), velocity.data(), acts.data(), routes.data(), loss_rows.data(),
              dbuf.data(), bn.data(), running.data(), bn_parts.data()};
    choose_algorithms();
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    // The peak of this process's own device allocations over the
    // constructor (device_bytes.h): the buffers, the largest workspace, and
    // the search's temporary ones, whatever other processes on the GPU do.
    measured = watch->rise();
    watch.reset();
  }

  // Every conv's three algorithms, timed on the step's buffers (a random-free
  // state: zeros and the parameters; convolution speed does not depend on
  // the values), then one workspace for the largest.
  void choose_algorithms() {
    const auto& ls = plan.network().layers;
    conv.resize(ls.size());
    std::size_t largest = 0;
    for (std::size_t i = 0; i <= plan.logits_layer(); ++i) {
      const Layer& l = ls[i];
      if (l.kind != LayerKind::conv) continue;
      conv[i] = std::make_unique<ConvDescs>(l, plan.batch());
      ConvDescs& d = *conv[i];
      // x: any buffer of x's size where the layer reads the input.
      const float* x = l.input < 0 ? arenas.dbuf : arenas.acts + plan.out_offset(static_cast<std::size_t>(l.input));
      float* y = arenas.acts + plan.out_offset(i);
      const float* w = weight_of(i, arenas.params);
      float* dw = weight_of(i, arenas.grads);
      d.fwd = cudnn_search_fp32_algorithm(cudnn.get(), stream, d.x.get(), x, d.w.get(), w, d.conv.get(), d.y.get(), y);
      const cudnnHandle_t h = cudnn.get();
      const float one = 1.0f, zero = 0.0f;
      bool filter_deterministic = true, data_deterministic = true;
      {
        const std::vector<Candidate> listed = candidates<cudnnConvolutionBwdFilterAlgoPerf_t>(
            [&](int* count) { return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, count); },
            [&](int count, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
              return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                                                                   count, returned, perf);
            });
        d.filter = static_cast<cudnnConvolutionBwdFilterAlgo_t>(search_backward(
            "cudnnConvolutionBackwardFilter", listed, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
            static_cast<int>(l.window), stream,
            [&](int a, std::size_t* bytes) {
              return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                                                                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), bytes);
            },
            [&](int a, void* ws, std::size_t bytes) {
              return cudnnConvolutionBackwardFilter(h, &one, d.x.get(), x, d.y.get(), y, d.conv.get(),
                                                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), ws, bytes, &zero,
                                                    d.w.get(), dw);
            },
            filter_deterministic));
      }
      if (l.input >= 0) {
        float* dx = arenas.dbuf;
        const std::vector<Candidate> listed = candidates<cudnnConvolutionBwdDataAlgoPerf_t>(
            [&](int* count) { return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, count); },
            [&](int count, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
              return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                                 count, returned, perf);
            });
        d.data = static_cast<cudnnConvolutionBwdDataAlgo_t>(search_backward(
            "cudnnConvolutionBackwardData", listed, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
            static_cast<int>(l.window), stream,
            [&](int a, std::size_t* bytes) {
              return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(a), bytes);
            },
            [&](int a, void* ws, std::size_t bytes) {
              return cudnnConvolutionBackwardData(h, &one, d.w.get(), w, d.y.get(), y, d.conv.get(),
                                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(a), ws, bytes, &zero,
                                                  d.x.get(), dx);
            },
            data_deterministic));
        std::size_t bytes = 0;
        DLB_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                                     d.data, &bytes));
        largest = std::max(largest, bytes);
      }
      std::size_t bytes = 0;
      DLB_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                                                                     d.filter, &bytes));
      largest = std::max(largest, bytes);
      largest = std::max(largest, cudnn_workspace_bytes(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), d.fwd));
      algorithm_names.append(algorithm_names.empty() ? "" : "; ")
          .append(l.name + " fwd " + std::string(cudnn_algo_name(d.fwd)).substr(sizeof("CUDNN_CONVOLUTION_FWD_ALGO_") - 1))
          .append(l.input >= 0 ? ", bwd data " + bwd_data_name(d.data) + (data_deterministic ? "" : " (non-deterministic)") : "")
          .append(", bwd filter " + bwd_filter_name(d.filter) + (filter_deterministic ? "" : " (non-deterministic)"));
    }
    workspace = DeviceBuffer<unsigned char>(largest);
  }

  float* weight_of(std::size_t layer, float* arena) const {
    const int j = plan.weight_param(layer);
    if (j < 0) throw Error("GPU training step: layer " + std::to_string(layer) + " has no weight");
    return arena + plan.param_offset(static_cast<std::size_t>(j));
  }
  // A layer's running mean (which 0) or var (1), copied to the host (waits); empty without batch-norm.
  std::vector<float> running_stat(std::size_t layer, int which) const {
    const std::int64_t at = plan.running_offset(layer);
    if (at < 0) return {};
    const std::int64_t k = plan.network().layers[layer].k;
    std::vector<float> out(static_cast<std::size_t>(k));
    DLB_CUDA_CHECK(cudaMemcpyAsync(out.data(), running.data() + at + which * k, out.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
  }

  // ---- TrainOps on the device
  void conv_forward(std::size_t i, const Layer&, const float* x, const float* w, float* y) override {
    const ConvDescs& d = *conv[i];
    const float one = 1.0f, zero = 0.0f;
    DLB_CUDNN_CHECK(cudnnConvolutionForward(cudnn.get(), &one, d.x.get(), x, d.w.get(), w, d.conv.get(), d.fwd,
                                            workspace.data(), workspace.bytes(), &zero, d.y.get(), y));
  }
  void conv_backward_filter(std::size_t i, const Layer&, const float* x, const float* dy, float* dw) override {
    const ConvDescs& d = *conv[i];
    const float one = 1.0f, zero = 0.0f;
    DLB_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn.get(), &one, d.x.get(), x, d.y.get(), dy, d.conv.get(),
                                                   d.filter, workspace.data(), workspace.bytes(), &zero, d.w.get(), dw));
  }
  void conv_backward_data(std::size_t i, const Layer&, const float* w, const float* dy, float* dx,
                          bool accumulate) override {
    const ConvDescs& d = *conv[i];
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    DLB_CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn.get(), &one, d.w.get(), w, d.y.get(), dy, d.conv.get(), d.data,
                                                 workspace.data(), workspace.bytes(), &beta, d.x.get(), dx));
  }
  // Row-major [rows, cols] is column-major [cols, rows]: cuBLAS sees every
  // matrix transposed.
  // y^T [k, n] = W [k, in] (W^T column-major, read transposed) x^T [in, n].
  void fc_forward(std::size_t, const Layer& l, const float* x, const float* w, float* y) override {
    const int k = cudnn_dim(l.k), in = cudnn_dim(l.in_size()), n = cudnn_dim(plan.batch());
    const float one = 1.0f, zero = 0.0f;
    DLB_CUBLAS_CHECK(cublasSgemm(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, k, n, in, &one, w, in, x, in, &zero, y, k));
  }
  // dW^T [in, k] = X^T [in, n] (dY^T)^T [n, k].
  void fc_backward_weights(std::size_t, const Layer& l, const float* x, const float* dy, float* dw) override {
    const int k = cudnn_dim(l.k), in = cudnn_dim(l.in_size()), n = cudnn_dim(plan.batch());
    const float one = 1.0f, zero = 0.0f;
    DLB_CUBLAS_CHECK(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_T, in, k, n, &one, x, in, dy, k, &zero, dw, in));
  }
  // dX^T [in, n] = W^T [in, k] dY^T [k, n].
  void fc_backward_data(std::size_t, const Layer& l, const float* w, const float* dy, float* dx,
                        bool accumulate) override {
    const int k = cudnn_dim(l.k), in = cudnn_dim(l.in_size()), n = cudnn_dim(plan.batch());
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    DLB_CUBLAS_CHECK(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, in, n, k, &one, w, in, dy, k, &beta, dx, in));
  }
  void run(const tg::BiasAct& p) override { tg::launch(p, stream); }
  void run(const tg::MaxPool& p) override { tg::launch(p, stream); }
  void run(const tg::MaxPoolBack& p) override { tg::launch(p, stream); }
  void run(const tg::ReluBack& p) override { tg::launch(p, stream); }
  void run(const tg::AvgPool& p) override { tg::launch(p, stream); }
  void run(const tg::AvgPoolBack& p) override { tg::launch(p, stream); }
  void run(const tg::LogSoftmaxNll& p) override { tg::launch(p, stream); }
  void run(const tg::NllGrad& p) override { tg::launch(p, stream); }
  void run(const tg::BiasGrad& p) override { tg::launch(p, stream); }
  void run(const tg::Sgd& p) override { tg::launch(p, stream); }
  void run(const tg::BnStats& p) override { tg::launch(p, stream); }
  void run(const tg::BnApply& p) override { tg::launch(p, stream); }
  void run(const tg::BnBackStats& p) override { tg::launch(p, stream); }
  void run(const tg::BnBackData& p) override { tg::launch(p, stream); }
  void run(const tg::AddGrad& p) override { tg::launch(p, stream); }
  // Profiling (GpuTrainStep::profile): an event at each mark while set.
  void mark(std::size_t layer, TrainPart part) override {
    if (!profiling) return;
    if (marks.size() == mark_events.size()) mark_events.emplace_back();
    mark_events[marks.size()].record(stream);
    marks.push_back({layer, part, 0.0});
  }

  std::vector<float> tensor(const DeviceBuffer<float>& arena, std::size_t j) const {
    std::vector<float> out(static_cast<std::size_t>(plan.params().at(j).size()));
    DLB_CUDA_CHECK(cudaMemcpyAsync(out.data(), arena.data() + plan.param_offset(j), out.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
  }

  std::unique_ptr<DeviceBytePeak> watch;  // first: it sees every allocation below
  TrainPlan plan;
  Sgd sgd;
  cudaStream_t stream;
  GpuLaunch launch;
  CudnnHandle cudnn;
  CublasHandle cublas;
  DeviceBuffer<float> params, grads, velocity, acts, dbuf, bn, running;
  DeviceBuffer<std::uint8_t> routes;
  DeviceBuffer<double> loss_rows, bn_parts;
  DeviceBuffer<unsigned char> workspace;
  std::vector<std::unique_ptr<ConvDescs>> conv;  // per layer (conv layers only)
  TrainArenas arenas;
  std::string algorithm_names;
  std::int64_t measured = 0;
  const float* x = nullptr;
  const std::uint8_t* labels = nullptr;
  bool forward_done = false, backward_done = false;
  PhaseGraphs forward_graphs, backward_graphs, update_graphs;  // GpuLaunch::graph, phases called apart
  PhaseGraphs step_graphs;                                      // GpuLaunch::graph, step()
  bool profiling = false;
  std::vector<Event> mark_events;
  std::vector<TrainStamp> marks;
};

GpuTrainStep::GpuTrainStep(const Network& net, std::int64_t batch, Sgd sgd, CUstream_st* stream, GpuLaunch launch)
    : impl_(std::make_unique<Impl>(net, batch, sgd, stream, launch)) {}
GpuTrainStep::~GpuTrainStep() = default;

void GpuTrainStep::forward(const float* x, const std::uint8_t* labels) {
  DLB_REQUIRE(x != nullptr && labels != nullptr, "GPU training step: no input or no labels");
  Impl& m = *impl_;
  m.x = x;
  m.labels = labels;
  const auto record = [&m, x, labels] { m.plan.forward(m, m.arenas, x, labels); };
  if (m.launch == GpuLaunch::graph) m.forward_graphs.run(m.stream, x, labels, record);
  else record();
  m.forward_done = true;
  m.backward_done = false;
}

void GpuTrainStep::backward() {
  Impl& m = *impl_;
  DLB_REQUIRE(m.forward_done, "training step: backward without a forward");
  const auto record = [&m] { m.plan.backward(m, m.arenas, m.x, m.labels); };
  if (m.launch == GpuLaunch::graph) m.backward_graphs.run(m.stream, m.x, m.labels, record);
  else record();
  m.backward_done = true;
}

void GpuTrainStep::update() {
  Impl& m = *impl_;
  DLB_REQUIRE(m.backward_done, "training step: update without a backward");
  const auto record = [&m] { m.plan.update(m, m.arenas, m.sgd); };
  if (m.launch == GpuLaunch::graph) m.update_graphs.run(m.stream, nullptr, nullptr, record);
  else record();
  m.backward_done = false;
}

void GpuTrainStep::step(const float* x, const std::uint8_t* labels) {
  Impl& m = *impl_;
  if (m.launch != GpuLaunch::graph) {
    forward(x, labels);
    backward();
    update();
    return;
  }
  DLB_REQUIRE(x != nullptr && labels != nullptr, "GPU training step: no input or no labels");
  m.x = x;
  m.labels = labels;
  const auto record = [&m, x, labels] {
    m.plan.forward(m, m.arenas, x, labels);
    m.plan.backward(m, m.arenas, x, labels);
    m.plan.update(m, m.arenas, m.sgd);
  };
  m.step_graphs.run(m.stream, x, labels, record);
  m.forward_done = true;
  m.backward_done = false;
}

void GpuTrainStep::prepare(const float* x, const std::uint8_t* labels) {
  Impl& m = *impl_;
  if (m.launch != GpuLaunch::graph) return;
  // What a step changes that outlives it, copied aside and back.
  DeviceBuffer<float>* kept[] = {&m.params, &m.velocity, &m.running};
  std::vector<DeviceBuffer<float>> saved;
  for (DeviceBuffer<float>* b : kept) {
    saved.emplace_back(b->size());
    DLB_CUDA_CHECK(cudaMemcpyAsync(saved.back().data(), b->data(), b->bytes(), cudaMemcpyDeviceToDevice, m.stream));
  }
  step(x, labels);
  for (std::size_t i = 0; i < saved.size(); ++i)
    DLB_CUDA_CHECK(cudaMemcpyAsync(kept[i]->data(), saved[i].data(), saved[i].bytes(), cudaMemcpyDeviceToDevice,
                                   m.stream));
  DLB_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.forward_done = false;
  m.backward_done = false;
}

GpuLaunch GpuTrainStep::launch() const { return impl_->launch; }

std::vector<std::pair<std::string, double>> GpuTrainStep::profile(const float* x, const std::uint8_t* labels,
                                                                  int steps) {
  DLB_REQUIRE(x != nullptr && labels != nullptr, "GPU training step: no input or no labels");
  DLB_REQUIRE(steps >= 1, "training profile: " + std::to_string(steps) + " steps; at least 1");
  Impl& m = *impl_;
  std::vector<std::vector<TrainStamp>> stamps;
  for (int n = 0; n < steps; ++n) {
    DLB_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    m.marks.clear();
    m.profiling = true;
    hold_stream(m.stream);
    try {
      m.plan.forward(m, m.arenas, x, labels);
      m.plan.backward(m, m.arenas, x, labels);
      m.plan.update(m, m.arenas, m.sgd);
    } catch (...) {
      release_stream();
      m.profiling = false;
      throw;
    }
    release_stream();
    m.profiling = false;
    DLB_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    DLB_REQUIRE(!stream_hold_timed_out(),
                "training profile: the host took over the stream hold's second to enqueue a step");
    for (std::size_t j = 0; j < m.marks.size(); ++j)
      m.marks[j].us = 1e3 * static_cast<double>(m.mark_events[j].elapsed_ms_since(m.mark_events[0]));
    stamps.push_back(m.marks);
  }
  m.x = x;
  m.labels = labels;
  m.forward_done = true;
  m.backward_done = false;
  return train_profile_counters(stamps);
}

double GpuTrainStep::loss() const {
  DLB_REQUIRE(impl_->forward_done, "GPU training step: no forward has run");
  std::vector<double> rows(static_cast<std::size_t>(impl_->plan.batch()));
  DLB_CUDA_CHECK(cudaMemcpyAsync(rows.data(), impl_->loss_rows.data(), impl_->loss_rows.bytes(), cudaMemcpyDeviceToHost,
                                 impl_->stream));
  DLB_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  double sum = 0;
  for (const double r : rows) sum += r;
  return sum / static_cast<double>(rows.size());
}

void GpuTrainStep::copy_loss_rows(double* host) const {
  DLB_REQUIRE(impl_->forward_done, "GPU training step: no forward has run");
  DLB_CUDA_CHECK(cudaMemcpyAsync(host, impl_->loss_rows.data(), impl_->loss_rows.bytes(), cudaMemcpyDeviceToHost,
                                 impl_->stream));
}

void GpuTrainStep::set_param(std::size_t i, std::span<const float> values) {
  const TrainPlan& plan = impl_->plan;
  const auto size = static_cast<std::size_t>(plan.params().at(i).size());
  DLB_REQUIRE(values.size() == size, "GPU training step: tensor " + std::to_string(i) + " has " +
                                         std::to_string(size) + " values, not " + std::to_string(values.size()));
  DLB_CUDA_CHECK(cudaMemcpyAsync(impl_->params.data() + plan.param_offset(i), values.data(), size * sizeof(float),
                                 cudaMemcpyHostToDevice, impl_->stream));
  DLB_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
}

std::int64_t GpuTrainStep::batch() const { return impl_->plan.batch(); }
CUstream_st* GpuTrainStep::stream() const { return impl_->stream; }
const std::vector<TrainParam>& GpuTrainStep::params() const { return impl_->plan.params(); }
std::vector<float> GpuTrainStep::param(std::size_t i) const { return impl_->tensor(impl_->params, i); }
std::vector<float> GpuTrainStep::grad(std::size_t i) const { return impl_->tensor(impl_->grads, i); }
std::vector<float> GpuTrainStep::velocity(std::size_t i) const { return impl_->tensor(impl_->velocity, i); }

std::vector<float> GpuTrainStep::running_mean(std::size_t layer) const { return impl_->running_stat(layer, 0); }
std::vector<float> GpuTrainStep::running_var(std::size_t layer) const { return impl_->running_stat(layer, 1); }

std::vector<float> GpuTrainStep::log_probs() const {
  const TrainPlan& plan = impl_->plan;
  std::vector<float> out(static_cast<std::size_t>(plan.batch() * plan.classes()));
  DLB_CUDA_CHECK(cudaMemcpyAsync(out.data(), impl_->acts.data() + plan.logp_offset(), out.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost, impl_->stream));
  DLB_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  return out;
}

TrainMemory GpuTrainStep::memory() const {
  TrainMemory m = impl_->plan.memory();
  m.workspace += static_cast<std::int64_t>(impl_->workspace.bytes());
  return m;
}

std::int64_t GpuTrainStep::measured_bytes() const { return impl_->measured; }
std::string GpuTrainStep::algorithms() const {
  return impl_->algorithm_names +
         (impl_->launch == GpuLaunch::graph ? "; step() one CUDA graph, phases called apart one each" : "");
}

}  // namespace dlb::nn

#pragma GCC diagnostic pop
