// The host twins of gpu_own_s8 and gpu_cublaslt_s8 (nn_s8_direct.h): their
// plan on host buffers, each kernel's element function in an OpenMP loop over
// the elements a GPU grid would cover, log-softmax by the softmax family's
// cpu_fused (the GPU rows use gpu_fused: the only step whose rounding may
// differ). gpu_cublaslt_s8's GEMM is a plain exact loop here with cuBLASLt's
// output stage (gemm_s8_gpu.h) after it.
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/nn/nn_s8_direct.h"

namespace dlb::nn {
namespace {

struct HostTarget {
  static constexpr const char* name = "gpu_own_s8 (host twin)";
  static constexpr const char* implementation = "a GPU int8 row's element functions on the host";
  bool as_gemm = false;  // gpu_cublaslt_s8's path: patches, GEMM, requantization
  template <class T>
  using Buffer = HostBuffer<T>;
  template <class T>
  Buffer<T> upload(const std::vector<T>& values) const {
    Buffer<T> b(values.size());
    std::copy(values.begin(), values.end(), b.data());
    return b;
  }
  void fill(Buffer<std::uint8_t>& b, std::uint8_t value) const { std::fill(b.span().begin(), b.span().end(), value); }
  // Quantize, Conv, Patches, Requantize, MaxPool, AvgPool: every element, as a grid would.
  template <class Params>
  void run(const Params& p) const {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < p.elements(); ++i) s8::element(p, i);
  }
  Run conv(const s8::Conv& c, const s8::PackedWeights& packed) const {
    if (!as_gemm || c.k % 4 != 0) return [*this, c] { run(c); };
    struct Gemm {
      std::vector<std::int8_t> patches, b;
      std::vector<std::int32_t> sums;  // column sums of b
      std::vector<float> scaled;
    };
    auto g = std::make_shared<Gemm>();
    const s8::Patches shape{c, nullptr};
    const std::int64_t columns = shape.columns(), pixels = c.pixels();
    g->patches.resize(static_cast<std::size_t>(pixels * columns));
    g->b = s8::weights_as_rows(packed, c.k);
    g->sums.assign(static_cast<std::size_t>(c.k), 0);
    for (std::size_t p = 0; p < static_cast<std::size_t>(columns); ++p)
      for (std::size_t o = 0; o < static_cast<std::size_t>(c.k); ++o) g->sums[o] += g->b[p * c.k + o];
    g->scaled.resize(static_cast<std::size_t>(pixels * c.k));
    const std::int32_t zero_point = static_cast<std::int32_t>(c.pad_word & 0xffu) - 128;  // of the s8 encoding
    return [*this, c, g, columns, pixels, zero_point] {
      run(s8::Patches{c, g->patches.data()});
#pragma omp parallel for schedule(static)
      for (std::int64_t pixel = 0; pixel < pixels; ++pixel)
        for (std::int64_t o = 0; o < c.k; ++o) {
          std::int32_t acc = 0;
          for (std::int64_t p = 0; p < columns; ++p)
            acc += g->patches[static_cast<std::size_t>(pixel * columns + p)] *
                   g->b[static_cast<std::size_t>(p * c.k + o)];
          g->scaled[static_cast<std::size_t>(pixel * c.k + o)] =
              static_cast<float>(acc - zero_point * g->sums[static_cast<std::size_t>(o)]) * c.scale[o];
        }
      run(s8::Requantize{c, g->scaled.data()});
    };
  }
  void log_softmax(const SoftmaxArgs& args) const { softmax_fused<SoftmaxKind::log_softmax>(args); }
};

}  // namespace

Run prepare_s8_direct_on_host(const NetArgs& args, bool as_gemm) {
  return s8::prepare_direct(args, HostTarget{as_gemm});
}

}  // namespace dlb::nn
