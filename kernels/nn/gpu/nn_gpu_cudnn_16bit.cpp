// gpu_cudnn_f16, gpu_cudnn_bf16 and gpu_cudnn_mixed_f16: a network in 16-bit
// floating point on cuDNN's and cuBLAS's tensor cores with fp32 accumulation
// (see nn.h). Activations NHWC (the layout of cuDNN's tensor-op kernels),
// weights rounded once in prepare (the convs' to KRSC, the fc weights after
// an image permuted to the NHWC flattening). Per conv cudnnConvolutionForward
// with the algorithm of cudnnFindConvolutionForwardAlgorithm (tensor-op math
// allowed, fp32 compute), then an own epilogue kernel (bias, residual, ReLU in
// fp32, rounded once); fc as cublasGemmEx (16-bit in, fp32 compute, 16-bit or
// fp32 out) and the same epilogue; own NHWC pools; fp32 logits and the
// softmax family's gpu_fused log-softmax. The mixed row keeps the first conv
// in fp32 (cuDNN, strict fp32, on the fp32 NCHW input), as autocast does.
//
// gpu_cudnn_fused (fp32 NHWC activations) and gpu_cudnn_fused_f16 are the
// same chain with each conv one operation graph of cuDNN's graph API (the
// backend C API, cudnn_graph.h; the plan's data in cudnn_fused_plan.h):
// conv, bias, residual and ReLU fused at run time into the conv's kernel
// (virtual intermediates in fp32), the engine chosen among the configs
// cuDNN's heuristics list (CUDNN_HEUR_MODE_A, else CUDNN_HEUR_MODE_FALLBACK)
// whose numerical notes the row allows, by timing each plan that finalises
// on the pass's own buffers as the benchmark times (cudnn_median_seconds),
// one choice per layer shape. A layer no allowed engine runs fused is the
// conv alone (a graph of one op) and the own epilogue; the counters
// fused_layers and layers say how many fused. The whole pass is captured
// once into a CUDA graph. The plans (with their runtime-compiled engines and
// timed choice) are built once per process for each layer shape, precision,
// batch and device, and reused by every later backend instance
// (cudnn_plan_cache.h), on one cuDNN handle per device that builds and runs
// them all.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/cudnn_graph_resources.h"
#include "kernels/common/cudnn_resources.h"
#include "kernels/conv/conv_cudnn.h"
#include "kernels/gemm/quant.h"
#include "kernels/nn/gpu/cudnn_fused_plan.h"
#include "kernels/nn/gpu/cudnn_plan_cache.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/gpu/nn_gpu.h"
#include "kernels/nn/infer/walk.h"
#include "kernels/softmax/softmax.h"

// The legacy convolution API: see cudnn_resources.h.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace dlb::nn {
namespace {

// fp32 values as 16-bit bits of `type`, rounded to nearest even.
std::vector<std::uint16_t> rounded(const std::vector<float>& x, NhwcType type) {
  std::vector<std::uint16_t> out(x.size());
  if (type == NhwcType::f16) {
    round_to_f16(x, out);
  } else {
    round_to_bf16(x, out);
  }
  return out;
}

// fp32 values on the device as the row's element type: 16-bit rounded to
// nearest even, or the fp32 values themselves.
DeviceBuffer<unsigned char> device_values(const std::vector<float>& x, NhwcType type) {
  if (type == NhwcType::f32) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(x.data());
    return to_device<unsigned char>(std::span<const unsigned char>(bytes, x.size() * sizeof(float)));
  }
  const std::vector<std::uint16_t> r = rounded(x, type);
  const auto* bytes = reinterpret_cast<const unsigned char*>(r.data());
  return to_device<unsigned char>(std::span<const unsigned char>(bytes, r.size() * sizeof(std::uint16_t)));
}

struct Shared {
  explicit Shared(cudaStream_t s) : stream(s), cudnn(s), cublas(s) {}
  cudaStream_t stream;
  CudnnHandle cudnn;
  CublasHandle cublas;
};

struct ConvStep {
  ConvStep(const Layer& l, std::int64_t n, cudnnDataType_t type, cudnnTensorFormat_t format, cudnnMathType_t math)
      : x_desc(cudnn_dim(n), cudnn_dim(l.c), cudnn_dim(l.h), cudnn_dim(l.w), type, format),
        w_desc(cudnn_dim(l.k), cudnn_dim(l.c), cudnn_dim(l.window), cudnn_dim(l.window), type, format),
        conv_desc(cudnn_dim(l.pad), cudnn_dim(l.pad), cudnn_dim(l.stride), cudnn_dim(l.stride), math, CUDNN_DATA_FLOAT),
        y_desc(cudnn_dim(n), cudnn_dim(l.k), cudnn_dim(l.oh), cudnn_dim(l.ow), type, format) {}
  CudnnTensorDesc x_desc;
  CudnnFilterDesc w_desc;
  CudnnConvolutionDesc conv_desc;
  CudnnTensorDesc y_desc;
  DeviceBuffer<unsigned char> weight16;  // the row's element type
  DeviceBuffer<float> weight32, bias, acc32;  // acc32: the fp32 conv's output (mixed row's first conv)
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  DeviceBuffer<unsigned char> workspace;
};

// ---------------------------------------------------------------- graph API

// The candidates the engine choice finalises and times per mode: runtime-
// fusion engines compile a kernel as they finalise (a second or so each),
// and cuDNN's heuristics list the likeliest first.
constexpr std::size_t kEngineCandidates = 4;

// What a row allows of an engine's numerical notes. fp32 rows: no tensor
// cores (TF32 rounds the inputs to 10 mantissa bits, an error of 2^-11 per
// product where the fp32 bound of the networks, 1e-5 in nn.cpp, is held
// against 2^-24 roundings: docs/networks.md), no converted inputs, no
// reduced-precision reduction, no FFT or Winograd (their transforms round
// more: the nonfused Winograd broke the bound, cudnn_fp32_tolerance). fp16:
// tensor cores are the point, but accumulation stays fp32 (no reduced-
// precision reduction), as gpu_cudnn_f16's.
bool allowed_notes(const std::vector<cudnnBackendNumericalNote_t>& notes, bool fp32) {
  for (const auto note : notes) {
    switch (note) {
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: return false;
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
      case CUDNN_NUMERICAL_NOTE_FFT:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
        if (fp32) return false;
        break;
      default: break;
    }
  }
  return true;
}

// A layer's operation graph as backend descriptors (cudnn_fused_plan.h's
// plan one for one); `graph` is null where cuDNN does not finalise it.
struct OpGraph {
  std::vector<CudnnBackendDesc> parts;  // tensors, the conv and pointwise descriptors, the ops
  std::vector<cudnnBackendDescriptor_t> ops;  // the operations, in order, each finalised
  std::string unfinalised;  // the first part cuDNN did not finalise ("" when all did)
  std::unique_ptr<CudnnBackendDesc> graph;
};

CudnnBackendDesc tensor_desc(const FusedTensor& t, cudnnDataType_t io_type) {
  CudnnBackendDesc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t type = t.fp32 ? CUDNN_DATA_FLOAT : io_type;
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  d.set_int64(CUDNN_ATTR_TENSOR_DIMENSIONS, {t.dims.begin(), t.dims.end()});
  d.set_int64(CUDNN_ATTR_TENSOR_STRIDES, {t.strides.begin(), t.strides.end()});
  d.set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, {t.uid});
  d.set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {16});  // cudaMalloc'd buffers: 256
  const bool is_virtual = t.is_virtual;
  d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  DLB_CUDNN_CHECK(d.finalize());
  return d;
}

// The plan's tensors and operations, finalised: no handle, no device.
OpGraph graph_parts(const FusedConvPlan& p, cudnnDataType_t io_type) {
  OpGraph g;
  g.parts.reserve(32);  // parts are referred to by position: no reallocation
  std::map<std::int64_t, std::size_t> tensor;  // uid -> index in parts
  for (const FusedTensor* t : p.tensors()) {
    tensor[t->uid] = g.parts.size();
    g.parts.push_back(tensor_desc(*t, io_type));
  }
  const auto part = [&](std::int64_t uid) -> const CudnnBackendDesc& { return g.parts[tensor.at(uid)]; };
  std::vector<cudnnBackendDescriptor_t>& ops = g.ops;
  const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
  for (const FusedOp& op : p.ops) {
    if (op.kind == FusedOpKind::conv) {
      CudnnBackendDesc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
      const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
      conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &fp32);
      conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
      conv.set_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, {2});
      conv.set_int64(CUDNN_ATTR_CONVOLUTION_DILATIONS, {1, 1});
      conv.set_int64(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {p.stride, p.stride});
      conv.set_int64(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {p.pad, p.pad});
      conv.set_int64(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {p.pad, p.pad});
      DLB_CUDNN_CHECK(conv.finalize());
      CudnnBackendDesc fwd(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
      const float alpha = 1.0f, beta = 0.0f;
      fwd.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, part(op.a));
      fwd.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, part(op.b));
      fwd.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, part(op.out));
      fwd.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
      fwd.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
      fwd.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
      if (fwd.finalize() != CUDNN_STATUS_SUCCESS) {
        g.unfinalised = "the convolution forward operation";
        return g;
      }
      g.parts.push_back(std::move(conv));
      ops.push_back(fwd.get());
      g.parts.push_back(std::move(fwd));
      continue;
    }
    CudnnBackendDesc mode_desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnPointwiseMode_t mode = op.kind == FusedOpKind::add ? CUDNN_POINTWISE_ADD : CUDNN_POINTWISE_RELU_FWD;
    mode_desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    mode_desc.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &fp32);
    DLB_CUDNN_CHECK(mode_desc.finalize());
    CudnnBackendDesc pw(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    pw.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, mode_desc);
    pw.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, part(op.a));
    if (op.kind == FusedOpKind::add) pw.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, part(op.b));
    pw.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, part(op.out));
    if (pw.finalize() != CUDNN_STATUS_SUCCESS) {
      g.unfinalised = std::string("the pointwise ") + fused_op_name(op.kind) + " operation";
      return g;
    }
    g.parts.push_back(std::move(mode_desc));
    ops.push_back(pw.get());
    g.parts.push_back(std::move(pw));
  }
  return g;
}

// The plan's operation graph on `handle`.
OpGraph op_graph(cudnnHandle_t handle, const FusedConvPlan& p, cudnnDataType_t io_type) {
  OpGraph g = graph_parts(p, io_type);
  if (!g.unfinalised.empty()) return g;
  const std::vector<cudnnBackendDescriptor_t>& ops = g.ops;
  auto graph = std::make_unique<CudnnBackendDesc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(ops.size()),
             ops.data());
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (graph->finalize() == CUDNN_STATUS_SUCCESS) g.graph = std::move(graph);
  return g;
}

// An execution plan of a layer's graph and what it needs to run.
struct GraphEngine {
  std::unique_ptr<CudnnBackendDesc> plan;
  std::int64_t workspace_bytes = 0;
  std::int64_t index = -1;  // the engine's global index
  bool runtime_compiled = false;
  double seconds = 0;
};

// The plans of the configs cuDNN's heuristics list for the graph in `mode`
// whose notes the row allows, finalised (at most kEngineCandidates): the
// deterministic ones where there are any.
std::vector<GraphEngine> graph_engines(cudnnHandle_t handle, const CudnnBackendDesc& graph, cudnnBackendHeurMode_t mode,
                                       bool fp32) {
  CudnnBackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (heur.finalize() != CUDNN_STATUS_SUCCESS) return {};
  const std::int64_t count = heur.get(CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, nullptr);
  std::vector<CudnnBackendDesc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  const std::int64_t listed =
      count == 0 ? 0 : heur.get(CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, raw.data());
  std::vector<GraphEngine> deterministic, other;
  for (std::int64_t i = 0; i < std::min(listed, count); ++i) {
    if (deterministic.size() + other.size() >= kEngineCandidates) break;
    const CudnnBackendDesc& config = configs[static_cast<std::size_t>(i)];
    CudnnBackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t engine_raw = engine.get();
    config.get(CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine_raw);
    std::vector<cudnnBackendNumericalNote_t> notes(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
    notes.resize(static_cast<std::size_t>(engine.get(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, notes.data())));
    if (!allowed_notes(notes, fp32)) continue;
    std::vector<cudnnBackendBehaviorNote_t> behavior(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
    behavior.resize(static_cast<std::size_t>(engine.get(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                                        CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, behavior.data())));
    GraphEngine e;
    engine.get(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &e.index);
    e.runtime_compiled = std::find(behavior.begin(), behavior.end(), CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) !=
                         behavior.end();
    e.plan = std::make_unique<CudnnBackendDesc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    e.plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    e.plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (e.plan->finalize() != CUDNN_STATUS_SUCCESS) continue;  // listed, but not for this graph here
    e.plan->get(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &e.workspace_bytes);
    const bool nondeterministic = std::find(notes.begin(), notes.end(), CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) !=
                                  notes.end();
    (nondeterministic ? other : deterministic).push_back(std::move(e));
  }
  return deterministic.empty() ? std::move(other) : std::move(deterministic);
}

// A variant pack: the graph's memory tensors' uids and buffers, the workspace.
CudnnBackendDesc variant_pack(const std::vector<std::int64_t>& uids, const std::vector<void*>& pointers,
                              void* workspace) {
  CudnnBackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set_int64(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(pointers.size()),
           pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  DLB_CUDNN_CHECK(pack.finalize());
  return pack;
}

// The fastest engine for graph `g` on these buffers (the memory tensors'
// uids and pointers), or null where no allowed engine finalises and runs.
// Timed as the benchmark times: after two untimed calls, the median of
// cudnn_median_seconds's calls between CUDA events on the stream.
std::shared_ptr<const GraphEngine> fastest_engine(cudnnHandle_t handle, cudaStream_t stream, const OpGraph& g,
                                                  bool fp32, const std::vector<std::int64_t>& uids,
                                                  const std::vector<void*>& pointers) {
  if (g.graph == nullptr) return nullptr;
  std::vector<GraphEngine> engines = graph_engines(handle, *g.graph, CUDNN_HEUR_MODE_A, fp32);
  if (engines.empty()) engines = graph_engines(handle, *g.graph, CUDNN_HEUR_MODE_FALLBACK, fp32);
  std::size_t free_bytes = 0, total_bytes = 0;
  DLB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::shared_ptr<GraphEngine> best;
  for (auto& e : engines) {
    // As the legacy search: never at the cost of the program's memory.
    if (static_cast<std::size_t>(e.workspace_bytes) > free_bytes / 2) continue;
    DeviceBuffer<unsigned char> workspace(static_cast<std::size_t>(e.workspace_bytes));
    const CudnnBackendDesc pack = variant_pack(uids, pointers, workspace.data());
    const auto run = [&] { return cudnnBackendExecute(handle, e.plan->get(), pack.get()); };
    if (run() != CUDNN_STATUS_SUCCESS) continue;  // finalised, but does not run these buffers
    DLB_CUDNN_CHECK(run());
    e.seconds = cudnn_median_seconds(stream, run);
    if (best == nullptr || e.seconds < best->seconds) best = std::make_shared<GraphEngine>(std::move(e));
  }
  DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return best;
}

// The cuDNN handle of the fused rows' plans on one device: every plan in
// the cache is built with it (a plan is made for a handle, and a handle for
// the device current when it was created) and run with it, its stream set
// to the caller's under `mutex`, since a handle is not for concurrent use.
struct PlanHandle {
  std::mutex mutex;
  CudnnHandle handle{nullptr};
  cudaStream_t stream = nullptr;  // the handle's
  // The handle, on `s`; call with `mutex` held. A pass's calls set the
  // stream only when it changes: they are captured into a CUDA graph right
  // after they ran eagerly on the same stream, so the capture sees no
  // cudnnSetStream. Prepare sets it always (`always`): a new stream may have
  // the address of a destroyed one.
  cudnnHandle_t on(cudaStream_t s, bool always = false) {
    if (always || s != stream) {
      DLB_CUDNN_CHECK(cudnnSetStream(handle.get(), s));
      stream = s;
    }
    return handle.get();
  }
};

// Kept for the life of the process, as the plans, and never destroyed:
// cuDNN objects destroyed at exit, after the CUDA runtime has been torn
// down, fail.
PlanHandle& plan_handle(int device) {
  static auto* handles = new std::map<int, std::unique_ptr<PlanHandle>>;
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  auto& h = (*handles)[device];
  if (h == nullptr) h = std::make_unique<PlanHandle>();  // on `device`, the current one
  return *h;
}

// The engine chosen per plan key (null: no allowed engine runs the graph).
PlanCache<std::shared_ptr<const GraphEngine>>& plan_cache() {
  static auto* cache = new PlanCache<std::shared_ptr<const GraphEngine>>;
  return *cache;
}

struct Options {
  const char* row;
  NhwcType type;
  bool fp32_first_conv;  // the mixed row
  bool fused = false;    // gpu_cudnn_fused(_f16): each conv one graph of the graph API, the pass one CUDA graph
};

// A conv of the fused rows: its weights, its bias, its graph ready to run
// (the plan shared by the layers of one graph key, its own workspace and
// variant pack).
struct FusedConvStep {
  DeviceBuffer<unsigned char> weight;
  DeviceBuffer<float> bias;
  PlanHandle* handle = nullptr;  // the plan's
  std::shared_ptr<const GraphEngine> engine;
  DeviceBuffer<unsigned char> workspace;
  std::unique_ptr<CudnnBackendDesc> pack;
  bool fused = false;  // false: the conv alone, the own epilogue after it
};

// A layer's output as the next layers read it: 16-bit NHWC, or fp32 (the
// logits and the input of log-softmax: what the int8 rows dequantize,
// dequantized_output).
struct Tensor16 {
  const void* y16 = nullptr;
  const float* y32 = nullptr;
};

// The 16-bit rows' functions for the walk (walk.h), on buffers of their own.
class Cudnn16Layers final : public GraphBackend<Tensor16> {
 public:
  Cudnn16Layers(const NetArgs& args, const Exec& exec, const Options& o)
      : args_(args), net_(*args.net), n_(args.batch), o_(o), row_(o.row),
        dt_(o.type == NhwcType::f16    ? CUDNN_DATA_HALF
            : o.type == NhwcType::bf16 ? CUDNN_DATA_BFLOAT16
                                       : CUDNN_DATA_FLOAT),
        blas_type_(o.type == NhwcType::f16 ? CUDA_R_16F : o.type == NhwcType::bf16 ? CUDA_R_16BF : CUDA_R_32F),
        // fp32 rows: strict fp32 (no TF32), as gpu_cudnn's cublasSgemm
        blas_compute_(o.type == NhwcType::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F),
        element_bytes_(o.type == NhwcType::f32 ? sizeof(float) : sizeof(std::uint16_t)) {
    DLB_REQUIRE(exec.stream != nullptr, row_ + " runs on a CUDA stream");
    sh_ = std::make_shared<Shared>(exec.stream);
    b_->out16.resize(net_.layers.size());
    b_->out32.resize(net_.layers.size());
  }

  Out conv(const Layer& l, const Io& io) override {
    const Output out = output(l, io);
    const bool from_input = l.input < 0;
    const auto elements = static_cast<std::size_t>(n_ * l.out_size());
    DLB_REQUIRE(!out.f32, row_ + ": " + l.name + ", a conv, would write the fp32 logits");
    const bool fp32 = from_input && o_.fp32_first_conv;
    if (from_input && !fp32) b_->input = DeviceBuffer<unsigned char>(static_cast<std::size_t>(n_ * net_.in_size()) * element_bytes_);
    if (o_.fused) return fused_conv(l, io, out);
    auto c = fp32 ? std::make_shared<ConvStep>(l, n_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH)
                  : std::make_shared<ConvStep>(l, n_, dt_, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH);
    c->bias = to_device<float>(l.bias);
    if (fp32) {
      c->weight32 = to_device<float>(l.weight);
      c->acc32 = DeviceBuffer<float>(elements);
      c->algo = cudnn_find_fp32_algorithm(sh_->cudnn.get(), c->x_desc.get(), c->w_desc.get(), c->conv_desc.get(),
                                          c->y_desc.get());
    } else {
      c->weight16 = device_values(conv_weights_krsc(l), o_.type);
      c->algo = cudnn_find_any_algorithm(sh_->cudnn.get(), c->x_desc.get(), c->w_desc.get(), c->conv_desc.get(),
                                         c->y_desc.get());
    }
    algorithms_.insert(cudnn_algo_name(c->algo));
    c->workspace = DeviceBuffer<unsigned char>(cudnn_workspace_bytes(
        sh_->cudnn.get(), c->x_desc.get(), c->w_desc.get(), c->conv_desc.get(), c->y_desc.get(), c->algo));
    b_->convs.push_back(c);
    // The input: the network's (fp32 NCHW, or converted to 16-bit NHWC
    // first) or the previous layer's 16-bit output.
    const void* x = fp32 ? static_cast<const void*>(args_.x) : from_input ? b_->input.data() : io.x.y16;
    const void* residual = io.residual == nullptr ? nullptr : io.residual->y16;
    return {out.tensor, [sh = sh_, b = b_, c, &l, &net = net_, n = n_, type = o_.type, fp32,
                         convert = from_input && !fp32, in = args_.x, x, residual, y16 = out.y16] {
              if (convert) launch_to_nhwc16(type, in, n, net.c, net.h * net.w, b->input.data(), sh->stream);
              const float one = 1.0f, zero = 0.0f;
              void* out = fp32 ? static_cast<void*>(c->acc32.data()) : y16;
              const void* w = fp32 ? static_cast<const void*>(c->weight32.data()) : c->weight16.data();
              DLB_CUDNN_CHECK(cudnnConvolutionForward(sh->cudnn.get(), &one, c->x_desc.get(), x, c->w_desc.get(), w,
                                                      c->conv_desc.get(), c->algo, c->workspace.data(),
                                                      c->workspace.bytes(), &zero, c->y_desc.get(), out));
              launch_epilogue16(type, n, l.k, l.oh * l.ow, fp32 ? c->acc32.data() : nullptr, c->bias.data(), residual,
                                l.relu, y16, sh->stream);
            }};
  }

  Out fc(const Layer& l, const Io& io) override {
    const Output out = output(l, io);
    DLB_REQUIRE(l.input >= 0, row_ + ": " + l.name + ", an fc, reads the network input");
    b_->fc_weights.push_back(device_values(fc_weights_nhwc(l), o_.type));
    b_->fc_biases.push_back(to_device<float>(l.bias));
    const void* w = b_->fc_weights.back().data();
    const float* bias = b_->fc_biases.back().data();
    // Column-major, as gpu_cudnn's fc: y^T [k, n] = W [k, in] (read
    // transposed from its row-major [k, in]) x^T [in, n].
    return {out.tensor, [sh = sh_, b = b_, &l, n = n_, type = o_.type, blas_type = blas_type_, compute = blas_compute_, w, bias, x = io.x.y16,
                         y16 = out.y16, y32 = out.y32] {
              const float one = 1.0f, zero = 0.0f;
              const int k = static_cast<int>(l.k), in = static_cast<int>(l.in_size()), rows = static_cast<int>(n);
              void* out = y32 != nullptr ? static_cast<void*>(y32) : y16;
              DLB_CUBLAS_CHECK(cublasGemmEx(sh->cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, k, rows, in, &one, w,
                                            blas_type, in, x, blas_type, in, &zero, out,
                                            y32 != nullptr ? CUDA_R_32F : blas_type, k, compute,
                                            CUBLAS_GEMM_DEFAULT));
              if (y32 != nullptr) {
                launch_bias_relu_rows(rows, k, bias, l.relu, y32, sh->stream);
              } else {
                launch_epilogue16(type, n, k, 1, nullptr, bias, nullptr, l.relu, y16, sh->stream);
              }
            }};
  }

  Out max_pool(const Layer& l, const Io& io) override {
    const Output out = output(l, io);
    DLB_REQUIRE(!out.f32, row_ + ": " + l.name + ", a pool, would write the fp32 logits");
    return {out.tensor, [sh = sh_, b = b_, &l, n = n_, type = o_.type, x = io.x.y16, y16 = out.y16] {
              launch_max_pool_nhwc16(type, l, n, x, y16, sh->stream);
            }};
  }

  Out global_avg_pool(const Layer& l, const Io& io) override {
    const Output out = output(l, io);
    DLB_REQUIRE(!out.f32, row_ + ": " + l.name + ", a pool, would write the fp32 logits");
    return {out.tensor, [sh = sh_, b = b_, &l, n = n_, type = o_.type, x = io.x.y16, y16 = out.y16] {
              launch_global_avg_pool_nhwc16(type, l, n, x, y16, sh->stream);
            }};
  }

  Out log_softmax(const Layer& l, const Io& io) override {
    const Output out = output(l, io);
    DLB_REQUIRE(out.last && l.input >= 0 && io.x.y32 != nullptr, row_ + ": log-softmax must end the network");
    return {out.tensor, [sh = sh_, b = b_, sm = SoftmaxArgs{n_, l.k, io.x.y32, args_.y}] {
              launch_softmax_fused<SoftmaxKind::log_softmax>(sm, sh->stream);
            }};
  }

  std::string implementation() const override {
    if (o_.fused) {
      std::string engines;
      for (const auto& e : engine_names_) engines.append(engines.empty() ? "" : ", ").append(e);
      const char* type = o_.type == NhwcType::f32 ? "fp32" : o_.type == NhwcType::f16 ? "fp16" : "bf16";
      return std::string(type) + " NHWC, fp32 accumulation: cuDNN graph API, " + std::to_string(fused_layers_) + "/" +
             std::to_string(conv_layers_) + " convs fused (" + engines +
             "), cublasGemmEx; own pools; one CUDA graph";
    }
    std::string conv;
    for (const auto& a : algorithms_) conv.append(conv.empty() ? "" : ", ").append(a);
    return std::string(o_.type == NhwcType::f16 ? "fp16" : "bf16") + (o_.fp32_first_conv ? " (first conv fp32)" : "") +
           " NHWC, fp32 accumulation: cuDNN " + conv + ", cublasGemmEx; own epilogues and pools";
  }

  Run pass(std::vector<Run> calls) override {
    DLB_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads and the algorithm searches
    if (!o_.fused) return GraphBackend::pass(std::move(calls));
    if (args_.report != nullptr)
      args_.report->counters = {{"fused_layers", fused_layers_}, {"layers", conv_layers_}};
    // One pass outside the capture (lazy module loading, first-call set-up),
    // then the calls captured once; the timed call replays them, as
    // gpu_cudnn_graph's.
    for (const auto& call : calls) call();
    DLB_CUDA_CHECK(cudaStreamSynchronize(sh_->stream));
    auto graph = std::make_shared<CudaGraph>(sh_->stream, [&calls] {
      for (const auto& call : calls) call();
    });
    return [graph, calls = std::move(calls), stream = sh_->stream] { graph->launch(stream); };
  }

 private:
  struct Buffers {
    DeviceBuffer<unsigned char> input;              // the row's element type
    std::vector<DeviceBuffer<unsigned char>> out16;  // likewise
    std::vector<DeviceBuffer<float>> out32;
    std::vector<std::shared_ptr<ConvStep>> convs;
    std::vector<std::shared_ptr<FusedConvStep>> fused_convs;
    std::vector<DeviceBuffer<unsigned char>> fc_weights;
    std::vector<DeviceBuffer<float>> fc_biases;
  };

  // The layer's output buffer: 16-bit, or fp32 (the last layer's is the caller's y).
  struct Output {
    Tensor16 tensor;
    void* y16 = nullptr;
    float* y32 = nullptr;
    bool f32 = false, last = false;
  };
  Output output(const Layer& l, const Io& io) {
    const std::size_t i = io.index;
    Output o;
    o.last = i + 1 == net_.layers.size();
    const bool f32 = o.f32 = dequantized_output(net_, i);
    const auto elements = static_cast<std::size_t>(n_ * l.out_size());
    if (!f32) b_->out16[i] = DeviceBuffer<unsigned char>(elements * element_bytes_);
    if (f32 && !o.last) b_->out32[i] = DeviceBuffer<float>(elements);
    o.y16 = f32 ? nullptr : b_->out16[i].data();
    o.y32 = !f32 ? nullptr : o.last ? args_.y : b_->out32[i].data();
    o.tensor = {o.y16, o.y32};
    DLB_REQUIRE(l.kind == LayerKind::log_softmax || l.input < 0 || io.x.y16 != nullptr,
                row_ + ": " + l.name + " reads an fp32 tensor");
    return o;
  }

  // A conv of the fused rows: the fused graph (fused_conv_plan) with the
  // fastest allowed engine, else the conv alone and the own epilogue; a conv
  // no engine runs either way is refused by name.
  Out fused_conv(const Layer& l, const Io& io, const Output& out) {
    auto f = std::make_shared<FusedConvStep>();
    f->weight = device_values(conv_weights_krsc(l), o_.type);
    f->bias = to_device<float>(l.bias);
    const bool from_input = l.input < 0;
    const void* x = from_input ? b_->input.data() : io.x.y16;
    const void* residual = io.residual == nullptr ? nullptr : io.residual->y16;
    void* y = out.y16;
    int device = 0;
    DLB_CUDA_CHECK(cudaGetDevice(&device));
    f->handle = &plan_handle(device);
    {
      const std::lock_guard lock(f->handle->mutex);
      f->handle->on(sh_->stream, true);
    }
    const char* io_type = o_.type == NhwcType::f32 ? "f32" : o_.type == NhwcType::f16 ? "f16" : "bf16";
    std::string key;
    for (const bool fused : {true, false}) {
      const FusedConvPlan plan = fused_conv_plan(net_, io.index, n_, fused);
      std::vector<std::int64_t> uids;
      std::vector<void*> pointers;
      for (const FusedTensor* t : plan.tensors()) {
        if (t->is_virtual) continue;
        const void* p = t->uid == kUidX      ? x
                        : t->uid == kUidW    ? f->weight.data()
                        : t->uid == kUidBias ? static_cast<const void*>(f->bias.data())
                        : t->uid == kUidY    ? y
                                             : residual;
        uids.push_back(t->uid);
        pointers.push_back(const_cast<void*>(p));
      }
      key = plan.key();
      std::shared_ptr<const GraphEngine> engine =
          plan_cache().get(fused_plan_key(device, io_type, plan), [&]() -> std::shared_ptr<const GraphEngine> {
            const std::lock_guard lock(f->handle->mutex);
            const cudnnHandle_t handle = f->handle->on(sh_->stream);
            const OpGraph g = op_graph(handle, plan, dt_);
            return fastest_engine(handle, sh_->stream, g, o_.type == NhwcType::f32, uids, pointers);
          });
      if (engine == nullptr) continue;
      f->engine = std::move(engine);
      f->fused = fused;
      f->workspace = DeviceBuffer<unsigned char>(static_cast<std::size_t>(f->engine->workspace_bytes));
      f->pack = std::make_unique<CudnnBackendDesc>(variant_pack(uids, pointers, f->workspace.data()));
      break;
    }
    if (f->engine == nullptr)
      throw Unsupported(row_ + ": no allowed cuDNN engine runs " + l.name + " (" + key + "), fused or alone");
    ++conv_layers_;
    if (f->fused) ++fused_layers_;
    engine_names_.insert("engine " + std::to_string(f->engine->index) +
                         (f->engine->runtime_compiled ? " runtime-compiled" : "") + (f->fused ? "" : " conv alone"));
    b_->fused_convs.push_back(f);
    return {out.tensor, [sh = sh_, b = b_, f, &l, &net = net_, n = n_, type = o_.type, convert = from_input,
                         in = args_.x, residual, y] {
              if (convert) launch_to_nhwc16(type, in, n, net.c, net.h * net.w, b->input.data(), sh->stream);
              {
                const std::lock_guard lock(f->handle->mutex);
                DLB_CUDNN_CHECK(cudnnBackendExecute(f->handle->on(sh->stream), f->engine->plan->get(), f->pack->get()));
              }
              if (!f->fused)
                launch_epilogue16(type, n, l.k, l.oh * l.ow, nullptr, f->bias.data(), residual, l.relu, y, sh->stream);
            }};
  }

  const NetArgs args_;
  const Network& net_;
  const std::int64_t n_;
  const Options o_;
  const std::string row_;
  const cudnnDataType_t dt_;
  const cudaDataType_t blas_type_;
  const cublasComputeType_t blas_compute_;
  const std::size_t element_bytes_;
  // The fused rows: the engines used, how many convs fused.
  std::set<std::string> engine_names_;
  int fused_layers_ = 0, conv_layers_ = 0;
  std::shared_ptr<Shared> sh_;
  std::shared_ptr<Buffers> b_ = std::make_shared<Buffers>();
  std::set<std::string> algorithms_;
};

Run prepare_16bit(const NetArgs& args, const Exec& exec, const Options& o) {
  Cudnn16Layers backend(args, exec, o);
  return walk_graph(args, backend, Tensor16{});
}

}  // namespace

PlanCacheCounts fused_plan_cache_counts() { return {plan_cache().hits(), plan_cache().misses()}; }

std::string fused_graph_parts_check(const FusedConvPlan& plan, NhwcType type) {
  const cudnnDataType_t io = type == NhwcType::f16    ? CUDNN_DATA_HALF
                             : type == NhwcType::bf16 ? CUDNN_DATA_BFLOAT16
                                                      : CUDNN_DATA_FLOAT;
  return graph_parts(plan, io).unfinalised;
}

Run prepare_net_gpu_cudnn_f16(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_f16", NhwcType::f16, false});
}

Run prepare_net_gpu_cudnn_bf16(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_bf16", NhwcType::bf16, false});
}

Run prepare_net_gpu_cudnn_mixed_f16(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_mixed_f16", NhwcType::f16, true});
}

Run prepare_net_gpu_cudnn_fused(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_fused", NhwcType::f32, false, true});
}

Run prepare_net_gpu_cudnn_fused_f16(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_fused_f16", NhwcType::f16, false, true});
}

}  // namespace dlb::nn

#pragma GCC diagnostic pop
