// cpu_eigen: the plain-library baseline (see nn.h). Convolutions are the conv
// family's cpu_im2col (own im2col, Eigen GEMM); the rest are Eigen
// expressions on row-major maps of the NCHW buffers.
// GCC 12's false -Wmaybe-uninitialized inside Eigen's inlined AVX-512 code
// (GCC bug 105593), as in conv_eigen.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include <memory>
#include <string>

#include "kernels/nn/infer/layers.h"
#include "kernels/nn/infer/walk.h"

namespace dlb::nn {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::Matrix<float, Eigen::Dynamic, 1>;
using RowVector = Eigen::Matrix<float, 1, Eigen::Dynamic>;

// Per image, y viewed as [k, plane]: + bias per row, + residual, ReLU.
void eigen_epilogue(const Layer& l, const Vector& bias, std::int64_t batch, const float* residual, float* y) {
  const std::int64_t plane = l.oh * l.ow;
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < batch; ++n) {
    Eigen::Map<RowMajor> out(y + n * l.k * plane, l.k, plane);
    out.colwise() += bias;
    if (residual != nullptr) out += Eigen::Map<const RowMajor>(residual + n * l.k * plane, l.k, plane);
    if (l.relu) out = out.cwiseMax(0.0f);
  }
}

// cpu_eigen's functions for the walk (walk.h): host NCHW buffers.
class EigenLayers final : public HostNchwPools {
 public:
  EigenLayers(std::int64_t batch, const Exec& exec) : HostNchwPools(batch), exec_(exec) {}

  Run conv(const Layer& l, const LayerIo& io) override {
    Run conv = prepare_conv_im2col(ConvArgs{conv_shape(l, batch_), io.x, l.weight.data(), io.y}, exec_);
    auto bias = std::make_shared<Vector>(Eigen::Map<const Vector>(l.bias.data(), l.k));
    return [conv = std::move(conv), bias, &l, batch = batch_, residual = io.residual, y = io.y] {
      conv();
      eigen_epilogue(l, *bias, batch, residual, y);
    };
  }
  Run fc(const Layer& l, const LayerIo& io) override {
    // y [batch, k] = x [batch, in] * W^T + b, W [k, in] as stored.
    auto w = std::make_shared<RowMajor>(Eigen::Map<const RowMajor>(l.weight.data(), l.k, l.in_size()));
    auto b = std::make_shared<RowVector>(Eigen::Map<const RowVector>(l.bias.data(), l.k));
    return [w, b, &l, batch = batch_, x = io.x, y = io.y] {
      Eigen::Map<const RowMajor> in(x, batch, l.in_size());
      Eigen::Map<RowMajor> out(y, batch, l.k);
      out.noalias() = in * w->transpose();
      out.rowwise() += *b;
      if (l.relu) out = out.cwiseMax(0.0f);
    };
  }
  Run log_softmax(const Layer& l, const LayerIo& io) override {
    return [k = l.k, batch = batch_, x = io.x, y = io.y] {
      Eigen::Map<const RowMajor> in(x, batch, k);
      Eigen::Map<RowMajor> out(y, batch, k);
      const Vector max = in.rowwise().maxCoeff();
      out = in.colwise() - max;
      const Vector log_sum = out.array().exp().rowwise().sum().log().matrix();
      out.colwise() -= log_sum;
    };
  }
  std::string implementation() const override { return "convs: cpu_im2col (Eigen GEMM)"; }

 private:
  const Exec exec_;
};

}  // namespace

Run prepare_net_cpu_eigen(const NetArgs& args, const Exec& exec) {
  EigenLayers backend(args.batch, exec);
  return walk<HostBuffer<float>>(args, backend);
}

}  // namespace dlb::nn

#pragma GCC diagnostic pop
