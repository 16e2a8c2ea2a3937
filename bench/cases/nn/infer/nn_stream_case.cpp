#include "bench/cases/nn/infer/nn_stream_case.h"

#include <algorithm>
#include <limits>
#include <span>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/random.h"
#include "kernels/nn/data/dataset.h"

namespace dlb {

const std::vector<StreamMode>& stream_modes() {
  static const std::vector<StreamMode> modes = {{"pageable_serial", false, false},
                                                {"pinned_serial", true, false},
                                                {"pageable_overlap", false, true},
                                                {"pinned_overlap", true, true}};
  return modes;
}

// One stream with its device buffers and a prepared pass on them.
struct NetStreamCase::Lane {
  Lane(const nn::NetVariant& variant, const nn::Network& net, std::int64_t batch)
      : ctx(Device::gpu),
        x(static_cast<std::size_t>(batch * net.in_size())),
        y(static_cast<std::size_t>(batch * net.classes)) {
    run = variant.prepare(nn::NetArgs{&net, batch, x.data(), y.data(), &report}, ctx.exec());
  }
  ExecContext ctx;
  DeviceBuffer<float> x, y;
  nn::NetReport report;
  Run run;
};

NetStreamCase::NetStreamCase(const nn::NetVariant& variant, std::string_view network, std::int64_t batch,
                             StreamMode mode)
    : variant_(variant), net_(nn::network(network)), batch_(batch), mode_(mode) {
  DLB_REQUIRE(variant.device == Device::gpu, "streaming the test set is a GPU case");
  const auto& data = nn::fashion_mnist_test();
  images_ = data.n;
  const auto in_count = static_cast<std::size_t>(images_ * net_.in_size());
  const auto out_count = static_cast<std::size_t>(images_ * net_.classes);
  if (mode.pinned) {
    auto in = std::make_shared<PinnedBuffer<float>>(in_count);
    auto out = std::make_shared<PinnedBuffer<float>>(out_count);
    in_ = in->data();
    out_ = out->data();
    pinned_in_ = in;
    pinned_out_ = out;
  } else {
    pageable_in_.resize(in_count);
    pageable_out_.resize(out_count);
    in_ = pageable_in_.data();
    out_ = pageable_out_.data();
  }
  // The images as the network takes them, prepared once: the loader's work
  // is not what this case measures.
  nn::network_input(data, 0, images_, net_.input_mean, net_.input_std, net_.c, net_.h, net_.w, in_);
  for (int i = 0; i < (mode.overlap ? 2 : 1); ++i) lanes_.push_back(std::make_unique<Lane>(variant, net_, batch));
}

NetStreamCase::~NetStreamCase() = default;

void NetStreamCase::run() {
  std::int64_t lane = 0;
  for (std::int64_t first = 0; first < images_; first += batch_) {
    Lane& l = *lanes_[static_cast<std::size_t>(lane)];
    cudaStream_t stream = l.ctx.exec().stream;
    // The last batch may be partial: the pass runs on a whole batch, the
    // images past the end of the set are whatever the buffer held.
    const std::int64_t count = std::min(batch_, images_ - first);
    DLB_CUDA_CHECK(cudaMemcpyAsync(l.x.data(), in_ + first * net_.in_size(),
                                   static_cast<std::size_t>(count * net_.in_size()) * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
    l.run();
    DLB_CUDA_CHECK(cudaMemcpyAsync(out_ + first * net_.classes, l.y.data(),
                                   static_cast<std::size_t>(count * net_.classes) * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
    if (mode_.overlap) {
      lane = 1 - lane;
    } else {
      l.ctx.synchronize();
    }
  }
  for (auto& l : lanes_) l->ctx.synchronize();
}

ref::Comparison NetStreamCase::validate() {
  std::fill(out_, out_ + images_ * net_.classes, std::numeric_limits<float>::quiet_NaN());
  run();
  const auto& data = nn::fashion_mnist_test();
  const auto& reference = nn::reference(net_.name);
  accuracy_ = NetAccuracy{};
  accuracy_.images = images_;
  std::int64_t correct = 0, torch_correct = 0;
  for (std::int64_t i = 0; i < images_; ++i) {
    const float* row = out_ + i * net_.classes;
    const auto predicted = std::max_element(row, row + net_.classes) - row;
    const auto at = static_cast<std::size_t>(i);
    correct += predicted == data.labels[at];
    torch_correct += reference.predictions[at] == data.labels[at];
    accuracy_.disagreements += predicted != reference.predictions[at];
  }
  accuracy_.accuracy = static_cast<double>(correct) / static_cast<double>(images_);
  accuracy_.torch_accuracy = static_cast<double>(torch_correct) / static_cast<double>(images_);
  const std::vector<double> expected(reference.logits.begin(), reference.logits.end());
  return ref::compare(std::span<const float>(out_, expected.size()), expected, variant_.tolerance_for(nn::NetArgs{&net_}));
}

}  // namespace dlb
