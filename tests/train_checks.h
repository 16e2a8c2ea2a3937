// Checks the training-step tests share (tests/test_train.cpp for the CPU
// step, tests/test_train_gpu.cpp for the GPU step and its host twin).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string_view>
#include <span>
#include <vector>

#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_variants.h"
#include "reference/nn/train/train.h"

namespace dlb::test {

// A CPU row of the training table (train_variants.h) by name, and a step
// made by it: what the tests run.
inline const nn::TrainVariant& cpu_row(std::string_view name) {
  return nn::train_variant(name, Device::cpu, "the test's row");
}
inline std::unique_ptr<nn::TrainStep> make_step(const nn::Network& net, std::int64_t batch, nn::Sgd sgd,
                                                std::string_view impl = "cpu_eigen") {
  return cpu_row(impl).make(net, batch, sgd);
}

// Batch-norm's running statistics, fp32 `got` against `want`, after
// `forwards` training-mode forwards at the same parameters whose batch
// statistics the reference computed in `g`. Each forward's batch mean is
// off by at most tol S_mean and its variance by tol S_var (the rounding
// bound nn::gradient_tolerance, whose N covers the forward's chains, times
// the scales TrainGradients::batch_*_scale: what the conv output's rounding
// errors scale with); an update scales that by momentum (the variance's
// also by M / (M - 1)) and each later one by (1 - momentum), so the sum over
// the forwards is at most momentum * forwards times it; each update rounds
// the running value to fp32 once (u |r|). `sides`: 1 where `want` is exact,
// 2 where it is another fp32 computation (PyTorch's). `impl`: whose bound
// (cpu_onednn's counts its fp32 batch statistics, train.h): a row's name.
inline void expect_running_stats(const nn::Network& net, std::int64_t batch, const ref::TrainGradients& g,
                                 const ref::RunningStats& want, const std::vector<std::span<const float>>& got_mean,
                                 const std::vector<std::span<const float>>& got_var, int forwards, double sides,
                                 const char* what, std::string_view impl = "cpu_eigen") {
  constexpr double kU = 0x1p-24;  // fp32's unit roundoff
  const double tol = cpu_row(impl).tolerance(net, batch);
  double worst = 0;
  int layers = 0;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    if (want.mean[i].empty()) continue;
    ++layers;
    const nn::Layer& l = net.layers[i];
    const double mo = l.raw.bn_momentum, m = static_cast<double>(batch * l.oh * l.ow);
    ASSERT_EQ(got_mean[i].size(), want.mean[i].size()) << l.name;
    ASSERT_EQ(got_var[i].size(), want.var[i].size()) << l.name;
    for (std::size_t k = 0; k < want.mean[i].size(); ++k) {
      const double bm =
          sides * mo * forwards * tol * g.batch_mean_scale[i][k] + forwards * kU * std::abs(want.mean[i][k]);
      const double bv = sides * mo * forwards * m / (m - 1) * tol * g.batch_var_scale[i][k] +
                        forwards * kU * std::abs(want.var[i][k]);
      const double em = std::abs(got_mean[i][k] - want.mean[i][k]), ev = std::abs(got_var[i][k] - want.var[i][k]);
      worst = std::max({worst, em / bm, ev / bv});
      EXPECT_LE(em, bm) << what << " " << l.name << " running_mean[" << k << "]";
      EXPECT_LE(ev, bv) << what << " " << l.name << " running_var[" << k << "]";
    }
  }
  EXPECT_GT(layers, 0);
  std::printf("%s: running statistics within %.2g of their bound at worst\n", what, worst);
}

}  // namespace dlb::test
