#include "bench/cases/conv_case.h"

#include <charconv>
#include <memory>

#include "bench/cases/checked_run.h"
#include "kernels/common/error.h"
#include "kernels/common/random.h"
#include "reference/conv.h"

namespace dlb {

const std::vector<NamedConvShape>& conv_default_shapes() {
  static const std::vector<NamedConvShape> shapes = [] {
    //                                                      n  c   h   w   k  r  s  stride pad
    const std::vector<NamedConvShape> layers = {
        {"resnet20 conv1 3->16 32x32", {1, 3, 32, 32, 16, 3, 3, 1, 1}},
        {"resnet20 stage1 16->16 32x32", {1, 16, 32, 32, 16, 3, 3, 1, 1}},
        {"resnet20 stage2 16->32 s2", {1, 16, 32, 32, 32, 3, 3, 2, 1}},
        {"resnet20 stage2 32->32 16x16", {1, 32, 16, 16, 32, 3, 3, 1, 1}},
        {"resnet20 stage3 32->64 s2", {1, 32, 16, 16, 64, 3, 3, 2, 1}},
        {"resnet20 stage3 64->64 8x8", {1, 64, 8, 8, 64, 3, 3, 1, 1}},
        {"mnist conv1 1->32 28x28", {1, 1, 28, 28, 32, 3, 3, 1, 0}},
        {"mnist conv2 32->64 26x26", {1, 32, 26, 26, 64, 3, 3, 1, 0}},
    };
    std::vector<NamedConvShape> out;
    for (const std::int64_t batch : {1, 64}) {
      for (auto layer : layers) {
        layer.shape.n = batch;
        out.push_back(layer);
      }
    }
    return out;
  }();
  return shapes;
}

namespace {

constexpr std::uint64_t kSeedX = 51, kSeedW = 52;

std::size_t checked_size(std::int64_t elements) { return static_cast<std::size_t>(elements); }

const ConvShape& checked(const ConvShape& shape) {
  validate_conv_shape(shape);
  return shape;
}

// The reference output of the last shape asked for. Benchmarks run shape by
// shape (every variant of a shape in a row), so each shape's reference
// (up to ~1.4 GFLOP in double for the largest default) is computed once.
std::shared_ptr<const std::vector<double>> reference_output(const ConvShape& shape, std::span<const float> x,
                                                            std::span<const float> w) {
  static std::string cached_shape;
  static std::shared_ptr<const std::vector<double>> cached;
  if (cached && cached_shape == shape.descriptor()) return cached;
  auto out = std::make_shared<std::vector<double>>(checked_size(shape.y_size()));
  ref::conv(shape, x, w, *out);
  cached = std::move(out);
  cached_shape = shape.descriptor();
  return cached;
}

}  // namespace

ConvCase::ConvCase(const ConvVariant& variant, const ConvShape& shape)
    : variant_(variant),
      shape_(checked(shape)),
      ctx_(variant.device),
      x_(checked_size(shape.x_size()), variant.device),
      w_(checked_size(shape.w_size()), variant.device),
      y_(checked_size(shape.y_size()), variant.device) {
  // The same seeds for every variant of a shape: the cached reference fits all.
  fill_random(x_.host(), kSeedX);
  fill_random(w_.host(), kSeedW);
  x_.upload();
  w_.upload();
  // prepare may read w (weight repacking, cuDNN's search): filled above.
  run_ = variant.prepare(ConvArgs{shape_, x_.data(), w_.data(), y_.data(), &report_}, ctx_.exec());
}

ref::Comparison ConvCase::validate() {
  const auto expected = reference_output(shape_, x_.host(), w_.host());
  return checked_run(run_, ctx_, y_, std::span<const double>(*expected), variant_.tolerance_for(ConvArgs{shape_}));
}

}  // namespace dlb
