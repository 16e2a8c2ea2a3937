// The recipe "A network backend" of docs/architecture.md, compiled and run by
// ctest (example_net_backend) so that it cannot drift from the code: a
// backend is one function per layer kind on the walk's seam (LayerBackend,
// kernels/nn/infer/walk.h), its prepare function walks it, and its row goes
// in kNetworkVariants (kernels/nn/infer/nn.cpp); test_docs checks that the
// recipe's lines are these. cpu_mine here runs cpu_own's layers but for its
// own max pool, and is checked as bench checks every row before timing it
// (NetCase: PyTorch's logits for the 256 reference images, then top-1 on
// test images); a planted max pool that takes the window's minimum must be
// refused by the same check.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "bench/cases/nn/infer/nn_case.h"
#include "examples/example_checks.h"
#include "kernels/nn/infer/nn.h"
#include "kernels/nn/infer/walk.h"

namespace dlb::nn {
namespace {

template <bool kPlanted>
class MineLayers : public LayerBackend {
 public:
  MineLayers(std::int64_t batch, const Exec& exec) : own_(own_cpu_layers(batch, exec)), batch_(batch) {}

  Run conv(const Layer& l, const LayerIo& io) override { return own_->conv(l, io); }
  Run fc(const Layer& l, const LayerIo& io) override { return own_->fc(l, io); }
  Run global_avg_pool(const Layer& l, const LayerIo& io) override { return own_->global_avg_pool(l, io); }
  Run log_softmax(const Layer& l, const LayerIo& io) override { return own_->log_softmax(l, io); }
  // The one kind this backend does its own way: a plain loop, NCHW.
  Run max_pool(const Layer& l, const LayerIo& io) override {
    return [l, io, batch = batch_] {
      for (std::int64_t plane = 0; plane < batch * l.c; ++plane)
        for (std::int64_t i = 0; i < l.oh; ++i)
          for (std::int64_t j = 0; j < l.ow; ++j) {
            const float* window = io.x + plane * l.h * l.w + i * l.stride * l.w + j * l.stride;
            float m = window[0];
            for (std::int64_t a = 0; a < l.window; ++a)
              for (std::int64_t b = 0; b < l.window; ++b)
                m = kPlanted ? std::min(m, window[a * l.w + b]) : std::max(m, window[a * l.w + b]);
            io.y[(plane * l.oh + i) * l.ow + j] = m;
          }
    };
  }
  std::string implementation() const override { return "cpu_own's layers, a plain max pool"; }

 private:
  std::unique_ptr<LayerBackend> own_;
  std::int64_t batch_;
};

template <bool kPlanted>
Run prepare_mine(const NetArgs& args, const Exec& exec) {
  MineLayers<kPlanted> backend(args.batch, exec);
  return walk<HostBuffer<float>>(args, backend);
}

}  // namespace

Run prepare_net_cpu_mine(const NetArgs& args, const Exec& exec) { return prepare_mine<false>(args, exec); }

const NetVariant kRows[] = {
    {"cpu_mine", Device::cpu, prepare_net_cpu_mine, kNetworkTolerance},
};
const NetVariant kPlanted{"cpu_mine_planted", Device::cpu, prepare_mine<true>, kNetworkTolerance};

}  // namespace dlb::nn

int main() {
  using namespace dlb;
  example::Checks checks;
  for (const nn::NetVariant& row : nn::kRows)
    for (const auto network : nn::network_names())
      for (const std::int64_t batch : {3}) {
        NetCase c(row, network, batch);
        const auto outputs = c.validate();
        const auto top1 = c.accuracy(300);
        checks.check(outputs.ok && top1.ok(), std::string(row.name) + " " + std::string(network) + " batch " +
                                                  std::to_string(batch) + ": " + outputs.summary() + "; " +
                                                  top1.summary());
      }
  // The check must be able to fail: mnist_lenet's pools take the minimum.
  checks.planted(NetCase(nn::kPlanted, "mnist_lenet", 3).validate().ok, "a min pool");
  return checks.finish("example_net_backend",
                       std::to_string(checks.checked()) + " networks checked and the planted row refused");
}
