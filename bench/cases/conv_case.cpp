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

ConvShape parse_conv_descriptor(std::string_view text) {
  const std::string quoted = "conv descriptor '" + std::string(text) + "': ";
  const std::string example = " (e.g. n64c16h32w32k16r3s3stride1pad1)";
  ConvShape shape;
  struct Field {
    const char* name;
    std::int64_t ConvShape::*member;
    bool seen = false;
  };
  Field fields[] = {{"n", &ConvShape::n},      {"c", &ConvShape::c}, {"h", &ConvShape::h},
                    {"w", &ConvShape::w},      {"k", &ConvShape::k}, {"r", &ConvShape::r},
                    {"s", &ConvShape::s},      {"stride", &ConvShape::stride}, {"pad", &ConvShape::pad}};
  if (text.empty()) throw Error(quoted + "empty" + example);
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t name_start = i;
    while (i < text.size() && text[i] >= 'a' && text[i] <= 'z') ++i;
    const std::string_view name = text.substr(name_start, i - name_start);
    if (name.empty()) {
      throw Error(quoted + "expected a field name at position " + std::to_string(name_start) + ", found '" +
                  std::string(1, text[name_start]) + "'" + example);
    }
    Field* field = nullptr;
    for (auto& f : fields)
      if (name == f.name) field = &f;
    if (field == nullptr)
      throw Error(quoted + "unknown field '" + std::string(name) + "' (fields: n c h w k r s stride pad)");
    if (field->seen) throw Error(quoted + "field '" + std::string(name) + "' given twice");
    const std::size_t digits_start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i == digits_start) {
      throw Error(quoted + "field '" + std::string(name) + "' needs a non-negative integer" +
                  (i < text.size() ? ", found '" + std::string(1, text[i]) + "'" : ", found the end"));
    }
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data() + digits_start, text.data() + i, value);
    if (ec != std::errc() || end != text.data() + i)
      throw Error(quoted + "field '" + std::string(name) + "' is too large");
    shape.*(field->member) = value;
    field->seen = true;
  }
  for (const char* required : {"n", "c", "h", "k", "r"}) {
    for (const auto& f : fields)
      if (std::string_view(f.name) == required && !f.seen)
        throw Error(quoted + "field '" + required + "' is missing (required: n c h k r)" + example);
  }
  if (!fields[3].seen) shape.w = shape.h;
  if (!fields[6].seen) shape.s = shape.r;
  try {
    validate_conv_shape(shape);
  } catch (const Error& e) {
    throw Error(quoted + e.what());
  }
  return shape;
}

std::vector<ConvShape> parse_conv_descriptors(std::string_view text) {
  std::vector<ConvShape> shapes;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    shapes.push_back(parse_conv_descriptor(text.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return shapes;
    start = comma + 1;
  }
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
  return checked_run(run_, ctx_, y_, std::span<const double>(*expected), variant_.tolerance);
}

}  // namespace dlb
