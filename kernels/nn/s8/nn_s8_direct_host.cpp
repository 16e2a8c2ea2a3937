// The host twins of gpu_own_s8, gpu_own_mma_s8 and gpu_cublaslt_s8
// (nn_s8_direct.h): their plan on host buffers, each kernel's element
// function in an OpenMP loop over the elements a GPU grid would cover,
// log-softmax by the softmax family's cpu_fused (the GPU rows use gpu_fused:
// the only step whose rounding may differ). gpu_own_mma_s8's conv runs warp
// by warp: the 32 lanes' lane functions on their registers, each mma modelled
// from them (s8_mma_math.h). gpu_cublaslt_s8's GEMM is a plain exact loop
// here with cuBLASLt's output stage (gemm_s8_gpu.h) after it.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/nn/s8/nn_s8_direct.h"

namespace dlb::nn {
namespace {

// The warps of the grid of launch_s8_mma_conv, each as the kernel runs it:
// every lane's loads for a k-step, then the step's mma on the warp's
// registers, then every lane's stores; with split k, each k range's warp
// in turn adding its partial sums (a warp's rows are its own, so the
// threads never add into the same sums), then MmaFinish's elements.
template <int NT>
void run_mma_warps(const s8::MmaConv& p) {
  if (p.splits > 1) std::fill(p.partial, p.partial + p.conv.elements(), 0);
#pragma omp parallel for schedule(static)
  for (std::int64_t warp = 0; warp < p.warps(); ++warp)
    for (int group = 0; group < p.column_groups(); ++group)
      for (int split = 0; split < p.splits; ++split) {
        const int nt0 = group * NT;
        s8::MmaLane<NT> lanes[32] = {};
        s8::MmaRows rows[32];
        for (int lane = 0; lane < 32; ++lane) rows[lane] = s8::mma_rows(p, warp, lane);
        for (int s = p.split_begin(split); s < p.split_begin(split + 1); ++s) {
          for (int lane = 0; lane < 32; ++lane) {
            s8::mma_load_a(p, rows[lane], s, lane, lanes[lane]);
            s8::mma_load_b(p, nt0, s, lane, lanes[lane]);
          }
          for (int mt = 0; mt < s8::kMmaMTiles; ++mt)
            for (int nt = 0; nt < NT; ++nt) s8::mma_on_host(lanes, mt, nt);
        }
        for (int lane = 0; lane < 32; ++lane)
          if (p.splits > 1)
            s8::mma_add_partial(p, warp, nt0, lane, lanes[lane]);
          else
            s8::mma_store(p, warp, nt0, lane, lanes[lane]);
      }
  if (p.splits == 1) return;
  const s8::MmaFinish finish{p.conv, p.partial};
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < finish.elements(); ++i) s8::element(finish, i);
}

void run_mma(const s8::MmaConv& p) {
  switch (p.nt) {
    case 1: return run_mma_warps<1>(p);
    case 2: return run_mma_warps<2>(p);
    case 4: return run_mma_warps<4>(p);
    case 8: return run_mma_warps<8>(p);
    default: DLB_REQUIRE(false, "gpu_own_mma_s8 (host twin): no kernel for " + std::to_string(p.nt) + " n-tiles a warp");
  }
}

enum class HostConv { direct, gemm, mma };

constexpr int kTwinMultiprocessors = 132;

struct HostTarget {
  static constexpr const char* name = "gpu_own_s8 (host twin)";
  static constexpr const char* implementation = "a GPU int8 row's element functions on the host";
  HostConv path = HostConv::direct;  // gemm: gpu_cublaslt_s8's (patches, GEMM, requantization); mma: gpu_own_mma_s8's
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
    if (path == HostConv::mma) {
      struct Mma {
        s8::MmaPacked packed;
        std::vector<std::int32_t> partial;
      };
      auto m = std::make_shared<Mma>(Mma{s8::pack_mma(c, packed), {}});
      s8::MmaConv p{c, m->packed.b.data(), m->packed.taps.data(), m->packed.k_steps, m->packed.n_tiles, m->packed.nt};
      // The k ranges an H200 (132 multiprocessors) would run.
      p.splits = s8::mma_splits(p, kTwinMultiprocessors);
      if (p.splits > 1) {
        m->partial.resize(static_cast<std::size_t>(c.elements()));
        p.partial = m->partial.data();
      }
      return [m, p] { run_mma(p); };
    }
    if (path != HostConv::gemm || c.k % 4 != 0) return [*this, c] { run(c); };
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
  return s8::prepare_direct(args, HostTarget{as_gemm ? HostConv::gemm : HostConv::direct});
}

Run prepare_s8_mma_on_host(const NetArgs& args) { return s8::prepare_direct(args, HostTarget{HostConv::mma}); }

}  // namespace dlb::nn
