// The conv shape's checks and its text form (the --conv descriptor): no
// variant, no library, so that the fuzz target (fuzz/) compiles this file
// alone.
#include <charconv>
#include <string>

#include "kernels/common/error.h"
#include "kernels/conv/conv.h"

namespace dlb {

void validate_conv_shape(const ConvShape& p) {
  const std::string where = "conv shape " + p.descriptor() + ": ";
  for (const auto& [name, value] : {std::pair<const char*, std::int64_t>{"n", p.n}, {"c", p.c}, {"h", p.h},
                                    {"w", p.w}, {"k", p.k}, {"r", p.r}, {"s", p.s}, {"stride", p.stride}}) {
    if (value < 1) throw Error(where + name + " must be a positive integer, got " + std::to_string(value));
  }
  if (p.pad < 0) throw Error(where + "pad must be >= 0, got " + std::to_string(p.pad));
  if (p.r > p.h + 2 * p.pad || p.s > p.w + 2 * p.pad) {
    throw Error(where + "the " + std::to_string(p.r) + "x" + std::to_string(p.s) +
                " filter is larger than the padded " + std::to_string(p.h + 2 * p.pad) + "x" +
                std::to_string(p.w + 2 * p.pad) + " input: no output");
  }
  // Products in double: the int64 products of absurd inputs could overflow.
  constexpr double kMaxElements = 2147483647.0;  // int32 dimensions and offsets in cuDNN and oneDNN
  const auto product = [](std::initializer_list<std::int64_t> v) {
    double out = 1.0;
    for (auto e : v) out *= static_cast<double>(e);
    return out;
  };
  if (product({p.n, p.c, p.h, p.w}) > kMaxElements || product({p.k, p.c, p.r, p.s}) > kMaxElements ||
      product({p.n, p.k, p.oh(), p.ow()}) > kMaxElements) {
    throw Error(where + "a tensor of 2^31 elements or more (x, w or y): not supported");
  }
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

}  // namespace dlb
