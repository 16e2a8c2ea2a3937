// gpu_own_s8, gpu_own_mma_s8 and gpu_cublaslt_s8: a network in int8 on the
// GPU (see nn.h and nn_s8_direct.h). gpu_own_s8: from first principles,
// every conv and fc a direct convolution on u8 x s8 dp4a with the
// requantizing epilogue fused. gpu_own_mma_s8: the same convolutions as an
// implicit GEMM on the int8 tensor cores (mma.sync m16n8k32, s8_mma_math.h),
// the same epilogue.
// gpu_cublaslt_s8: the library path, each conv and fc with a multiple of 4
// outputs as patches (s8), cuBLASLt's int8 tensor-core GEMM with the gemm
// family's output stage (gemm_cublaslt.cpp), then the requantizing epilogue;
// the others (the 10 logits, lenet's 6-channel conv: cuBLASLt's int8 needs
// multiples of 4) on the own dp4a kernel. Pools on codes and gpu_fused
// log-softmax in both.
#include <memory>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/gemm/gemm.h"
#include "kernels/nn/gpu/nn_gpu.h"
#include "kernels/nn/s8/nn_s8_direct.h"

namespace dlb::nn {
namespace {

struct DeviceTarget {
  static constexpr const char* name = "gpu_own_s8";
  static constexpr const char* implementation =
      "own direct conv, u8 x s8 dp4a, requantization fused, NHWC u8, weight scales per channel";
  cudaStream_t stream = nullptr;
  template <class T>
  using Buffer = DeviceBuffer<T>;
  template <class T>
  Buffer<T> upload(const std::vector<T>& values) const {
    return to_device<T>(std::span<const T>(values));
  }
  void fill(Buffer<std::uint8_t>& b, std::uint8_t value) const {
    DLB_CUDA_CHECK(cudaMemsetAsync(b.data(), value, b.bytes(), stream));
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  void run(const s8::Quantize& p) const { launch_s8_quantize(p, stream); }
  void run(const s8::MaxPool& p) const { launch_s8_max_pool(p, stream); }
  void run(const s8::AvgPool& p) const { launch_s8_avg_pool(p, stream); }
  Run conv(const s8::Conv& c, const s8::PackedWeights&) const {
    return [c, stream = stream] { launch_s8_conv(c, stream); };
  }
  void log_softmax(const SoftmaxArgs& args) const { launch_softmax_fused<SoftmaxKind::log_softmax>(args, stream); }
};

struct CublasLtTarget : DeviceTarget {
  static constexpr const char* name = "gpu_cublaslt_s8";
  static constexpr const char* implementation =
      "cuBLASLt int8 GEMM on patches (s8), own requantizing epilogue, NHWC u8, weight scales per channel; "
      "layers with outputs not in multiples of 4 on the own dp4a conv";
  Run conv(const s8::Conv& c, const s8::PackedWeights& packed) const {
    if (c.k % 4 != 0) return DeviceTarget::conv(c, packed);
    struct Gemm {
      DeviceBuffer<std::int8_t> patches, b;
      DeviceBuffer<float> scaled;  // the dequantized sums [pixels, k]
      Run gemm;
    };
    auto g = std::make_shared<Gemm>();
    const s8::Patches shape{c, nullptr};
    g->patches = DeviceBuffer<std::int8_t>(static_cast<std::size_t>(shape.elements()));
    g->b = to_device<std::int8_t>(std::span<const std::int8_t>(s8::weights_as_rows(packed, c.k)));
    g->scaled = DeviceBuffer<float>(static_cast<std::size_t>(c.elements()));
    GemmArgs args;
    args.m = c.pixels();
    args.n = c.k;
    args.k = shape.columns();
    args.a_s8 = g->patches.data();
    args.a_zero_point = static_cast<std::int32_t>(c.pad_word & 0xffu);
    args.b_s8 = g->b.data();
    args.c_scale = c.scale;
    args.c = g->scaled.data();
    g->gemm = prepare_gemm_cublaslt_s8(args, Exec{stream});
    return [g, c, stream = stream] {
      launch_s8_patches(s8::Patches{c, g->patches.data()}, stream);
      g->gemm();
      launch_s8_requantize(s8::Requantize{c, g->scaled.data()}, stream);
    };
  }
};

struct MmaTarget : DeviceTarget {
  static constexpr const char* name = "gpu_own_mma_s8";
  static constexpr const char* implementation =
      "own implicit GEMM on int8 tensor cores (mma.sync m16n8k32 u8 x s8), requantization fused, NHWC u8, "
      "weight scales per channel";
  int multiprocessors = 1;  // the device's: how far a layer's k-steps are split (s8_mma_math.h)
  Run conv(const s8::Conv& c, const s8::PackedWeights& packed) const {
    struct Mma {
      DeviceBuffer<std::uint32_t> b;
      DeviceBuffer<s8::MmaTap> taps;
      DeviceBuffer<std::int32_t> partial;  // with split k
    };
    const s8::MmaPacked m = s8::pack_mma(c, packed);
    auto buffers = std::make_shared<Mma>();
    buffers->b = upload(m.b);
    buffers->taps = upload(m.taps);
    s8::MmaConv p{c, buffers->b.data(), buffers->taps.data(), m.k_steps, m.n_tiles, m.nt};
    p.splits = s8::mma_splits(p, multiprocessors);
    if (p.splits > 1) {
      buffers->partial = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(c.elements()));
      p.partial = buffers->partial.data();
    }
    return [buffers, p, stream = stream] { launch_s8_mma_conv(p, stream); };
  }
};

}  // namespace

Run prepare_net_gpu_own_mma_s8(const NetArgs& args, const Exec& exec) {
  DLB_REQUIRE(exec.stream != nullptr, "gpu_own_mma_s8 runs on a CUDA stream");
  int device = 0, major = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&device));
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  DLB_REQUIRE(major >= 8, "gpu_own_mma_s8 needs int8 mma.sync (compute capability 8.0 or later)");
  MmaTarget target;
  target.stream = exec.stream;
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&target.multiprocessors, cudaDevAttrMultiProcessorCount, device));
  return s8::prepare_direct(args, target);
}

Run prepare_net_gpu_own_s8(const NetArgs& args, const Exec& exec) {
  DLB_REQUIRE(exec.stream != nullptr, "gpu_own_s8 runs on a CUDA stream");
  return s8::prepare_direct(args, DeviceTarget{exec.stream});
}

Run prepare_net_gpu_cublaslt_s8(const NetArgs& args, const Exec& exec) {
  DLB_REQUIRE(exec.stream != nullptr, "gpu_cublaslt_s8 runs on a CUDA stream");
  CublasLtTarget target;
  target.stream = exec.stream;
  return s8::prepare_direct(args, target);
}

}  // namespace dlb::nn
