// cpu_own: a network on dlbench's own CPU kernels (see nn.h).
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "kernels/common/error.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/infer/walk.h"
#include "kernels/softmax/softmax.h"

namespace dlb::nn {
namespace {

// The own conv rows of the conv family this backend chooses from.
constexpr std::string_view kOwnConvs[] = {"cpu_direct", "cpu_winograd"};

struct ChosenConv {
  Run run;
  std::string_view name;
};

// Prepares every own conv that accepts the layer and keeps the fastest: one
// warm-up call, then the best of three (what cudnnFind does for cuDNN).
ChosenConv fastest_own_conv(const ConvArgs& args, const Exec& exec) {
  ChosenConv best;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (const auto& v : conv_variants()) {
    if (std::find(std::begin(kOwnConvs), std::end(kOwnConvs), v.name) == std::end(kOwnConvs)) continue;
    if (!v.usable() || !v.accepts_problem(args)) continue;
    Run run = v.prepare(args, exec);
    run();
    double seconds = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 3; ++i) {
      const auto start = std::chrono::steady_clock::now();
      run();
      seconds = std::min(seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (seconds < best_seconds) {
      best_seconds = seconds;
      best = {std::move(run), v.name};
    }
  }
  DLB_REQUIRE(best.run, "no own conv kernel accepts " + args.shape.descriptor());
  return best;
}

// y[n][k][p] = relu?(y[n][k][p] + bias[k] + residual?[n][k][p]): folded
// batch-norm, ResNet's join and the activation in one pass over the conv's
// output.
void conv_epilogue(const float* bias, const float* residual, bool relu, std::int64_t batch, std::int64_t k,
                   std::int64_t plane, float* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t nk = 0; nk < batch * k; ++nk) {
    const float b = bias[nk % k];
    float* out = y + nk * plane;
    const float* res = residual == nullptr ? nullptr : residual + nk * plane;
    if (res != nullptr) {
      for (std::int64_t i = 0; i < plane; ++i) out[i] += b + res[i];
    } else {
      for (std::int64_t i = 0; i < plane; ++i) out[i] += b;
    }
    if (relu)
      for (std::int64_t i = 0; i < plane; ++i) out[i] = std::max(out[i], 0.0f);
  }
}

// Fully connected: y[n][o] = relu?(b[o] + sum_i x[n][i] * W[o][i]). W is
// packed in prepare as wt[i][o], o padded to a multiple of kCols with zeros,
// so that a block of kRows rows x kCols outputs accumulates in registers
// (GCC vectorizes the o loop: 2 AVX-512 vectors x 4 rows) while x[.][i] is
// broadcast. Threads split (row block, output block) items.
class OwnFc {
 public:
  static constexpr std::int64_t kRows = 4, kCols = 32;

  OwnFc(const Layer& l, std::int64_t batch)
      : batch_(batch), in_(l.in_size()), out_(l.k), cols_((l.k + kCols - 1) / kCols * kCols), relu_(l.relu),
        wt_(static_cast<std::size_t>(in_ * cols_)), bias_(static_cast<std::size_t>(cols_)) {
    std::fill(wt_.span().begin(), wt_.span().end(), 0.0f);
    std::fill(bias_.span().begin(), bias_.span().end(), 0.0f);
    for (std::int64_t o = 0; o < out_; ++o) {
      bias_[static_cast<std::size_t>(o)] = l.bias[static_cast<std::size_t>(o)];
      for (std::int64_t i = 0; i < in_; ++i)
        wt_[static_cast<std::size_t>(i * cols_ + o)] = l.weight[static_cast<std::size_t>(o * in_ + i)];
    }
  }

  void run(const float* x, float* y) const {
    const std::int64_t row_blocks = (batch_ + kRows - 1) / kRows, col_blocks = cols_ / kCols;
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
      for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
        // Rows past the batch repeat the last row (read, never stored).
        const float* rows[kRows];
        for (std::int64_t r = 0; r < kRows; ++r) rows[r] = x + std::min(rb * kRows + r, batch_ - 1) * in_;
        float acc[kRows][kCols] = {};
        const float* w = wt_.data() + cb * kCols;
        for (std::int64_t i = 0; i < in_; ++i) {
          const float* wi = w + i * cols_;
          for (std::int64_t r = 0; r < kRows; ++r) {
            const float xv = rows[r][i];
            for (std::int64_t j = 0; j < kCols; ++j) acc[r][j] += xv * wi[j];
          }
        }
        for (std::int64_t r = 0; r < kRows && rb * kRows + r < batch_; ++r) {
          for (std::int64_t j = 0; j < kCols && cb * kCols + j < out_; ++j) {
            const float v = acc[r][j] + bias_[static_cast<std::size_t>(cb * kCols + j)];
            y[(rb * kRows + r) * out_ + cb * kCols + j] = relu_ ? std::max(v, 0.0f) : v;
          }
        }
      }
    }
  }

 private:
  std::int64_t batch_, in_, out_, cols_;
  bool relu_;
  HostBuffer<float> wt_, bias_;
};

// cpu_own's functions for the walk (walk.h): host NCHW buffers.
class OwnCpuLayers final : public HostNchwPools {
 public:
  OwnCpuLayers(std::int64_t batch, const Exec& exec) : HostNchwPools(batch), exec_(exec) {}

  Run conv(const Layer& l, const LayerIo& io) override {
    auto conv = fastest_own_conv(ConvArgs{conv_shape(l, batch_), io.x, l.weight.data(), io.y}, exec_);
    ++chosen_[conv.name];
    auto bias = std::make_shared<std::vector<float>>(l.bias);
    return [run = std::move(conv.run), bias, residual = io.residual, relu = l.relu, batch = batch_, k = l.k,
            plane = l.oh * l.ow, y = io.y] {
      run();
      conv_epilogue(bias->data(), residual, relu, batch, k, plane, y);
    };
  }
  Run fc(const Layer& l, const LayerIo& io) override {
    auto fc = std::make_shared<OwnFc>(l, batch_);
    return [fc, x = io.x, y = io.y] { fc->run(x, y); };
  }
  Run log_softmax(const Layer& l, const LayerIo& io) override {
    return [sm = SoftmaxArgs{batch_, l.k, io.x, io.y}] { softmax_fused<SoftmaxKind::log_softmax>(sm); };
  }
  std::string implementation() const override {
    std::string s = "convs:";
    for (const auto& [name, count] : chosen_) s.append(" ").append(name).append(" x").append(std::to_string(count));
    return s;
  }

 private:
  const Exec exec_;
  std::map<std::string_view, int> chosen_;
};

}  // namespace

std::unique_ptr<LayerBackend> own_cpu_layers(std::int64_t batch, const Exec& exec) {
  return std::make_unique<OwnCpuLayers>(batch, exec);
}

Run prepare_net_cpu_own(const NetArgs& args, const Exec& exec) {
  OwnCpuLayers backend(args.batch, exec);
  return walk<HostBuffer<float>>(args, backend);
}

}  // namespace dlb::nn
