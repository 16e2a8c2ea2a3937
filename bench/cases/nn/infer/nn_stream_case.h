// The whole Fashion-MNIST test set streamed through a GPU network backend in
// batches, as an inference or training loop feeds it: per batch, copy the
// images to the device, run the pass, copy the outputs back. Four ways,
// the questions `pin_memory=True` and a prefetching loader answer:
//   pageable_serial   images in ordinary (pageable) host memory, one batch after another
//   pinned_serial     page-locked host memory, one batch after another
//   pageable_overlap  two streams taking alternate batches, pageable memory (the copies stage
//                     through the driver's pinned buffer and wait; little can overlap)
//   pinned_overlap    two streams, pinned memory: batch i+1's copies overlap batch i's pass
// Built with CUDA only; validated by the top-1 answers of the whole run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cases/nn/infer/nn_case.h"

namespace dlb {

struct StreamMode {
  std::string_view name;  // "pinned_overlap"...
  bool pinned;
  bool overlap;
};
const std::vector<StreamMode>& stream_modes();

class NetStreamCase {
 public:
  NetStreamCase(const nn::NetVariant& variant, std::string_view network, std::int64_t batch, StreamMode mode);
  ~NetStreamCase();
  // One run over the test set (checked: top-1 against PyTorch's answers,
  // logits of the reference images against PyTorch's).
  ref::Comparison validate();
  const NetAccuracy& accuracy() const { return accuracy_; }
  // One pass over the whole test set; returns when the last outputs are on the host.
  void run();
  std::int64_t images() const { return images_; }
  const nn::Network& network() const { return net_; }

 private:
  struct Lane;
  const nn::NetVariant& variant_;
  const nn::Network& net_;
  std::int64_t batch_, images_;
  StreamMode mode_;
  std::vector<float> pageable_in_, pageable_out_;
  std::shared_ptr<void> pinned_in_, pinned_out_;  // PinnedBuffer<float>, kept opaque here
  float* in_ = nullptr;   // [images, c, h, w]
  float* out_ = nullptr;  // [images, classes]
  std::vector<std::unique_ptr<Lane>> lanes_;
  NetAccuracy accuracy_;
};

}  // namespace dlb
