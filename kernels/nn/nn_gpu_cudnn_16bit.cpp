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
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/cudnn_resources.h"
#include "kernels/conv/conv_cudnn.h"
#include "kernels/gemm/quant.h"
#include "kernels/nn/layers.h"
#include "kernels/nn/nn_gpu.h"
#include "kernels/nn/walk.h"
#include "kernels/softmax/softmax.h"

// The legacy convolution API: see cudnn_resources.h.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace dlb::nn {
namespace {

// fp32 values as 16-bit bits of `type`, rounded to nearest even.
std::vector<std::uint16_t> rounded(const std::vector<float>& x, Half16 type) {
  std::vector<std::uint16_t> out(x.size());
  if (type == Half16::f16) {
    round_to_f16(x, out);
  } else {
    round_to_bf16(x, out);
  }
  return out;
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
  DeviceBuffer<std::uint16_t> weight16;
  DeviceBuffer<float> weight32, bias, acc32;  // acc32: the fp32 conv's output (mixed row's first conv)
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  DeviceBuffer<unsigned char> workspace;
};

struct Options {
  const char* row;
  Half16 type;
  bool fp32_first_conv;  // the mixed row
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
        dt_(o.type == Half16::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16),
        blas_type_(o.type == Half16::f16 ? CUDA_R_16F : CUDA_R_16BF) {
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
    auto c = fp32 ? std::make_shared<ConvStep>(l, n_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH)
                  : std::make_shared<ConvStep>(l, n_, dt_, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH);
    c->bias = to_device<float>(l.bias);
    if (fp32) {
      c->weight32 = to_device<float>(l.weight);
      c->acc32 = DeviceBuffer<float>(elements);
      c->algo = cudnn_find_fp32_algorithm(sh_->cudnn.get(), c->x_desc.get(), c->w_desc.get(), c->conv_desc.get(),
                                          c->y_desc.get());
    } else {
      c->weight16 = to_device<std::uint16_t>(rounded(conv_weights_krsc(l), o_.type));
      c->algo = cudnn_find_any_algorithm(sh_->cudnn.get(), c->x_desc.get(), c->w_desc.get(), c->conv_desc.get(),
                                         c->y_desc.get());
    }
    algorithms_.insert(cudnn_algo_name(c->algo));
    c->workspace = DeviceBuffer<unsigned char>(cudnn_workspace_bytes(
        sh_->cudnn.get(), c->x_desc.get(), c->w_desc.get(), c->conv_desc.get(), c->y_desc.get(), c->algo));
    b_->convs.push_back(c);
    // The input: the network's (fp32 NCHW, or converted to 16-bit NHWC
    // first) or the previous layer's 16-bit output.
    if (from_input && !fp32) b_->input = DeviceBuffer<std::uint16_t>(static_cast<std::size_t>(n_ * net_.in_size()));
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
    b_->fc_weights.push_back(to_device<std::uint16_t>(rounded(fc_weights_nhwc(l), o_.type)));
    b_->fc_biases.push_back(to_device<float>(l.bias));
    const void* w = b_->fc_weights.back().data();
    const float* bias = b_->fc_biases.back().data();
    // Column-major, as gpu_cudnn's fc: y^T [k, n] = W [k, in] (read
    // transposed from its row-major [k, in]) x^T [in, n].
    return {out.tensor, [sh = sh_, b = b_, &l, n = n_, type = o_.type, blas_type = blas_type_, w, bias, x = io.x.y16,
                         y16 = out.y16, y32 = out.y32] {
              const float one = 1.0f, zero = 0.0f;
              const int k = static_cast<int>(l.k), in = static_cast<int>(l.in_size()), rows = static_cast<int>(n);
              void* out = y32 != nullptr ? static_cast<void*>(y32) : y16;
              DLB_CUBLAS_CHECK(cublasGemmEx(sh->cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, k, rows, in, &one, w,
                                            blas_type, in, x, blas_type, in, &zero, out,
                                            y32 != nullptr ? CUDA_R_32F : blas_type, k, CUBLAS_COMPUTE_32F,
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
    std::string conv;
    for (const auto& a : algorithms_) conv.append(conv.empty() ? "" : ", ").append(a);
    return std::string(o_.type == Half16::f16 ? "fp16" : "bf16") + (o_.fp32_first_conv ? " (first conv fp32)" : "") +
           " NHWC, fp32 accumulation: cuDNN " + conv + ", cublasGemmEx; own epilogues and pools";
  }

  Run pass(std::vector<Run> calls) override {
    DLB_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads and the algorithm searches
    return GraphBackend::pass(std::move(calls));
  }

 private:
  struct Buffers {
    DeviceBuffer<std::uint16_t> input;
    std::vector<DeviceBuffer<std::uint16_t>> out16;
    std::vector<DeviceBuffer<float>> out32;
    std::vector<std::shared_ptr<ConvStep>> convs;
    std::vector<DeviceBuffer<std::uint16_t>> fc_weights;
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
    if (!f32) b_->out16[i] = DeviceBuffer<std::uint16_t>(elements);
    if (f32 && !o.last) b_->out32[i] = DeviceBuffer<float>(elements);
    o.y16 = f32 ? nullptr : b_->out16[i].data();
    o.y32 = !f32 ? nullptr : o.last ? args_.y : b_->out32[i].data();
    o.tensor = {o.y16, o.y32};
    DLB_REQUIRE(l.kind == LayerKind::log_softmax || l.input < 0 || io.x.y16 != nullptr,
                row_ + ": " + l.name + " reads an fp32 tensor");
    return o;
  }

  const NetArgs args_;
  const Network& net_;
  const std::int64_t n_;
  const Options o_;
  const std::string row_;
  const cudnnDataType_t dt_;
  const cudaDataType_t blas_type_;
  std::shared_ptr<Shared> sh_;
  std::shared_ptr<Buffers> b_ = std::make_shared<Buffers>();
  std::set<std::string> algorithms_;
};

Run prepare_16bit(const NetArgs& args, const Exec& exec, const Options& o) {
  Cudnn16Layers backend(args, exec, o);
  return walk_graph(args, backend, Tensor16{});
}

}  // namespace

Run prepare_net_gpu_cudnn_f16(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_f16", Half16::f16, false});
}

Run prepare_net_gpu_cudnn_bf16(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_bf16", Half16::bf16, false});
}

Run prepare_net_gpu_cudnn_mixed_f16(const NetArgs& args, const Exec& exec) {
  return prepare_16bit(args, exec, Options{"gpu_cudnn_mixed_f16", Half16::f16, true});
}

}  // namespace dlb::nn

#pragma GCC diagnostic pop
