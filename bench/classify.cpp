// classify: the networks at work, as the course's inference script shows
// them. Runs one backend of the network table over the first test images of
// Fashion-MNIST and prints, per image, the label, the top-1 class with its
// probability, and the top 5.
//
//   build/classify [--network=resnet20] [--backend=cpu_own] [--images=10] [--first=0]
//                  [--weights=FILE.safetensors]
//
// Exit 0 on success, 2 on bad arguments or bad input files (with a message).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cli.h"
#include "kernels/common/error.h"
#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/infer/nn.h"

namespace {

constexpr const char* kClasses[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
constexpr const char* kUsage =
    "usage: classify [--network=resnet20|mnist_cnn|mnist_lenet] [--backend=NAME] [--images=N] [--first=I] "
    "[--weights=FILE]";

int run(int argc, char** argv) {
  std::string network = "resnet20", backend, weights;
  long long images = 10, first = 0;
  if (!dlb::cli::parse_flags(argc, argv,
                             {{"--network", [&](std::string_view v) { network = v; }},
                              {"--backend", [&](std::string_view v) { backend = v; }},
                              {"--images", [&](std::string_view v) { images = dlb::cli::parse_count("--images", v); }},
                              {"--first", [&](std::string_view v) { first = dlb::cli::parse_count("--first", v); }},
                              {"--weights", [&](std::string_view v) { weights = v; }}},
                             kUsage))
    return 0;

  const auto variants = dlb::usable_variants(dlb::nn::network_variants(), dlb::Device::cpu);
  if (backend.empty()) backend = variants.front()->name;  // the first row of the table
  const dlb::nn::NetVariant* variant = nullptr;
  std::string known;
  for (const auto* v : variants) {
    known.append(known.empty() ? "" : ", ").append(v->name);
    if (v->name == backend) variant = v;
  }
  if (variant == nullptr) throw dlb::Error("unknown backend '" + backend + "' (this build has: " + known + ")");

  const auto net = dlb::nn::load_network(network, weights.empty() ? dlb::nn::weights_path(network) : weights);
  const auto& data = dlb::nn::fashion_mnist_test();
  if (images < 1 || first >= data.n || images > data.n - first) {
    throw dlb::Error("--first=" + std::to_string(first) + " --images=" + std::to_string(images) +
                     ": the test set has images 0.." + std::to_string(data.n - 1));
  }

  // In batches of at most kBatch images (the last one may be smaller).
  constexpr long long kBatch = 256;
  const long long batch = std::min(images, kBatch);
  std::vector<float> y(static_cast<std::size_t>(images * net.classes));
  const dlb::ExecContext ctx(variant->device);
  dlb::Operand<float> x_op(static_cast<std::size_t>(batch * net.in_size()), variant->device);
  dlb::Operand<float> y_op(static_cast<std::size_t>(batch * net.classes), variant->device);
  dlb::nn::NetReport report;
  const dlb::Run pass =
      variant->prepare(dlb::nn::NetArgs{&net, batch, x_op.data(), y_op.data(), &report}, ctx.exec());
  for (long long b = 0; b < images; b += batch) {
    const long long count = std::min(batch, images - b);
    std::fill(x_op.host().begin(), x_op.host().end(), 0.0f);
    dlb::nn::network_input(data, first + b, count, net.input_mean, net.input_std, net.c, net.h, net.w,
                           x_op.host().data());
    x_op.upload();
    pass();
    ctx.synchronize();
    y_op.download();
    std::copy_n(y_op.host().begin(), count * net.classes, y.begin() + b * net.classes);
  }

  std::printf("%s (%s) on %s, backend %s\n", net.name.c_str(), net.weights_path.c_str(), data.source.c_str(),
              std::string(variant->name).c_str());
  const bool log_probabilities = net.output().kind == dlb::nn::LayerKind::log_softmax;
  int correct = 0;
  for (long long i = 0; i < images; ++i) {
    const float* out = y.data() + i * net.classes;
    std::vector<double> p(out, out + net.classes);
    if (log_probabilities) {
      for (auto& v : p) v = std::exp(v);
    } else {  // logits: softmax
      const double m = *std::max_element(p.begin(), p.end());
      double sum = 0;
      for (auto& v : p) sum += (v = std::exp(v - m));
      for (auto& v : p) v /= sum;
    }
    std::vector<int> order(static_cast<std::size_t>(net.classes));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) { return p[a] > p[b]; });
    const int label = data.labels[static_cast<std::size_t>(first + i)];
    correct += order[0] == label;
    std::printf("image %5lld  label %-11s  top-1 %-11s %5.1f%% %s  top-5:", first + i, kClasses[label],
                kClasses[order[0]], 100 * p[order[0]], order[0] == label ? "ok   " : "WRONG");
    for (int r = 0; r < 5; ++r) std::printf(" %s (%.1f%%)%s", kClasses[order[r]], 100 * p[order[r]], r < 4 ? "," : "");
    std::printf("\n");
  }
  std::printf("%d of %lld correct\n", correct, images);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlb::cli::main_reporting_errors("classify", run, argc, argv); }
