#include "bench/descriptor.h"

#include <algorithm>
#include <charconv>
#include <cstddef>

#include "kernels/common/error.h"

namespace dlb::bench {
namespace {

std::string quoted(std::string_view family, std::string_view text) {
  std::string out(family);
  return out.append(" descriptor '").append(text).append("': ");
}

std::string field_list(std::span<const DescriptorField> fields) {
  std::string out;
  for (const auto& f : fields) out.append(out.empty() ? "" : " ").append(f.name);
  return out;
}

std::int64_t suffix_factor(char c) {
  switch (c) {
    case 'K': case 'k': return std::int64_t{1} << 10;
    case 'M': case 'm': return std::int64_t{1} << 20;
    case 'G': case 'g': return std::int64_t{1} << 30;
    default: return 0;
  }
}

// One value: digits, and a size suffix where the field takes one.
std::int64_t parse_value(const std::string& where, const DescriptorField& field, std::string_view value) {
  const std::string name(field.name);
  const std::string limit = (field.size_suffix ? size_text(field.max) : std::to_string(field.max));
  const std::string range = " (an integer from 1 to " + limit + ", " + std::string(field.max_why) + ")";
  if (value.empty()) throw Error(where + "field '" + name + "' has no value" + range);
  std::int64_t factor = 1;
  std::string_view digits = value;
  if (field.size_suffix && suffix_factor(value.back()) != 0) {
    factor = suffix_factor(value.back());
    digits.remove_suffix(1);
  }
  const bool all_digits =
      !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!all_digits) {
    throw Error(where + "field '" + name + "' must be an integer" + (field.size_suffix ? " (suffix K, M or G)" : "") +
                ", got '" + std::string(value) + "'" + range);
  }
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  const bool too_large = ec == std::errc::result_out_of_range || (ec == std::errc() && v > field.max / factor);
  if (too_large) throw Error(where + name + " " + std::string(value) + " is past the limit " + limit + range);
  if (ec != std::errc() || end != digits.data() + digits.size())  // not reached: all digits
    throw Error(where + "field '" + name + "': cannot read '" + std::string(value) + "'");
  v *= factor;
  if (v < 1) throw Error(where + name + " must be at least 1, got " + std::string(value));
  return v;
}

template <class Shape>
void add_once(std::vector<Shape>& into, Shape shape) {
  if (std::find(into.begin(), into.end(), shape) == into.end()) into.push_back(std::move(shape));
}

}  // namespace

std::vector<std::int64_t> parse_descriptor_fields(std::string_view family, std::string_view text,
                                                  std::span<const DescriptorField> fields, std::string_view example) {
  const std::string where = quoted(family, text);
  const std::string tail = " (fields " + field_list(fields) + "; e.g. " + std::string(example) + ")";
  if (text.empty()) throw Error(where + "empty" + tail);
  std::vector<std::int64_t> values(fields.size(), 0);
  std::vector<bool> seen(fields.size(), false);
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = text.find('/', start);
    const std::string_view part = text.substr(start, slash == std::string_view::npos ? slash : slash - start);
    const std::size_t colon = part.find(':');
    const std::string_view name = part.substr(0, colon);
    if (part.empty()) throw Error(where + "an empty field (two '/' in a row, or one at an end)" + tail);
    std::size_t i = 0;
    while (i < fields.size() && fields[i].name != name) ++i;
    if (i == fields.size()) throw Error(where + "unknown field '" + std::string(name) + "'" + tail);
    if (colon == std::string_view::npos)
      throw Error(where + "field '" + std::string(name) + "' needs ':' and a value, as " + std::string(name) +
                  ":64" + tail);
    if (seen[i]) throw Error(where + "field '" + std::string(name) + "' given twice");
    values[i] = parse_value(where, fields[i], part.substr(colon + 1));
    seen[i] = true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (!seen[i]) throw Error(where + "field '" + std::string(fields[i].name) + "' is missing" + tail);
  return values;
}

std::string size_text(std::int64_t bytes) {
  for (const auto& [suffix, factor] : {std::pair{"G", std::int64_t{1} << 30}, {"M", std::int64_t{1} << 20},
                                       {"K", std::int64_t{1} << 10}})
    if (bytes >= factor && bytes % factor == 0) return std::to_string(bytes / factor) + suffix;
  return std::to_string(bytes);
}

// ------------------------------------------------------------------ families

namespace {
constexpr std::string_view kIntWhy = "the int dimensions of the CUDA kernels, cuDNN and cuBLAS";
constexpr DescriptorField kSoftmaxFields[] = {{"rows", kMaxIntDimension, kIntWhy}, {"cols", kMaxIntDimension, kIntWhy}};
constexpr DescriptorField kGemmFields[] = {
    {"m", kMaxIntDimension, kIntWhy}, {"n", kMaxIntDimension, kIntWhy}, {"k", kMaxIntDimension, kIntWhy}};
constexpr DescriptorField kDaxpyFields[] = {{"n", kMaxIntDimension, "cuBLAS's int n", true}};
constexpr DescriptorField kCopyFields[] = {{"bytes", kMaxCopyBytes, "1 TiB", true}};
constexpr DescriptorField kInferenceFields[] = {
    {"batch", kMaxInferenceBatch, "the images of the Fashion-MNIST test set"}};
constexpr DescriptorField kTrainFields[] = {{"batch", kMaxTrainBatch, "the images of the Fashion-MNIST training set"}};
}  // namespace

std::string SoftmaxShape::descriptor() const {
  return "rows:" + std::to_string(rows) + "/cols:" + std::to_string(cols);
}
SoftmaxShape parse_softmax_descriptor(std::string_view text) {
  const auto v = parse_descriptor_fields("softmax", text, kSoftmaxFields, "rows:128/cols:1024");
  return {v[0], v[1]};
}

std::string GemmShape::descriptor() const {
  return "m:" + std::to_string(m) + "/n:" + std::to_string(n) + "/k:" + std::to_string(k);
}
GemmShape parse_gemm_descriptor(std::string_view text) {
  const auto v = parse_descriptor_fields("gemm", text, kGemmFields, "m:64/n:128/k:9216");
  return {v[0], v[1], v[2]};
}

std::string DaxpyShape::descriptor() const { return "n:" + std::to_string(n); }
DaxpyShape parse_daxpy_descriptor(std::string_view text) {
  return {parse_descriptor_fields("daxpy", text, kDaxpyFields, "n:1M")[0]};
}

std::string CopyShape::descriptor() const { return "bytes:" + std::to_string(bytes); }
CopyShape parse_copy_descriptor(std::string_view text) {
  return {parse_descriptor_fields("copy", text, kCopyFields, "bytes:64M")[0]};
}

std::string NetShape::descriptor() const { return network + "/batch:" + std::to_string(batch); }
NetShape parse_net_descriptor(std::string_view text) {
  const std::size_t slash = text.find('/');
  const std::string_view network = text.substr(0, slash);
  std::string known;
  bool found = false, train = false;
  for (const std::string_view name : kDescriptorNetworks) {
    known.append(name).append(" ").append(name).append("_train ");
    if (network == name) found = true;
    if (network.size() == name.size() + 6 && network.starts_with(name) && network.ends_with("_train"))
      found = train = true;
  }
  known.pop_back();
  const std::string where = quoted("net", text);
  if (!found) {
    throw Error(where + (network.empty() ? std::string("no network") : "unknown network '" + std::string(network) + "'") +
                " (networks: " + known + "; e.g. resnet20/batch:64)");
  }
  if (slash == std::string_view::npos) throw Error(where + "field 'batch' is missing (e.g. " + std::string(network) + "/batch:64)");
  const std::string example = std::string(network) + "/batch:64";
  // The fields after the network; errors quote the whole descriptor.
  try {
    const auto v = parse_descriptor_fields("net", text.substr(slash + 1), train ? kTrainFields : kInferenceFields,
                                           example);
    return {std::string(network), v[0]};
  } catch (const Error& e) {
    const std::string inner = e.what();
    const std::string prefix = quoted("net", text.substr(slash + 1));
    throw Error(where + (inner.starts_with(prefix) ? inner.substr(prefix.size()) : inner));
  }
}

// ------------------------------------------------------------ all of them

bool Descriptors::empty() const { return size() == 0; }
std::size_t Descriptors::size() const {
  return conv.size() + softmax.size() + gemm.size() + daxpy.size() + copy.size() + net.size();
}

void add_descriptor(std::string_view family, std::string_view text, Descriptors& into) {
  if (family == "conv") {
    for (const ConvShape& shape : parse_conv_descriptors(text)) {
      const auto same = [&](const ConvShape& s) { return s.descriptor() == shape.descriptor(); };
      if (std::none_of(into.conv.begin(), into.conv.end(), same)) into.conv.push_back(shape);
    }
  } else if (family == "softmax") {
    add_once(into.softmax, parse_softmax_descriptor(text));
  } else if (family == "gemm") {
    add_once(into.gemm, parse_gemm_descriptor(text));
  } else if (family == "daxpy") {
    add_once(into.daxpy, parse_daxpy_descriptor(text));
  } else if (family == "copy") {
    add_once(into.copy, parse_copy_descriptor(text));
  } else if (family == "net") {
    add_once(into.net, parse_net_descriptor(text));
  } else {
    std::string known;
    for (const auto f : kDescriptorFamilies) known.append(known.empty() ? "" : " ").append(f);
    throw Error("unknown family '" + std::string(family) + "' (families: " + known + ")");
  }
}

Descriptors parse_shapes_file(std::string_view text, std::string_view origin) {
  Descriptors out;
  std::vector<std::string> bad;
  std::size_t line_number = 0, start = 0;
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (start <= text.size()) {
    const std::size_t newline = text.find('\n', start);
    std::string_view line = text.substr(start, newline == std::string_view::npos ? newline : newline - start);
    ++line_number;
    start = newline == std::string_view::npos ? text.size() + 1 : newline + 1;
    line = line.substr(0, line.find('#'));
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty()) continue;
    const auto word_end = static_cast<std::size_t>(std::find_if(line.begin(), line.end(), is_space) - line.begin());
    const std::string_view family = line.substr(0, word_end);
    std::string_view rest = line.substr(word_end);
    while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
    const std::string where = std::string(origin) + ":" + std::to_string(line_number) + ": ";
    try {
      if (line.find('\0') != std::string_view::npos) throw Error("a NUL byte in the line");
      if (rest.empty()) throw Error("'" + std::string(line) + "': expected '<family> <descriptor>', e.g. 'gemm m:64/n:10/k:512'");
      if (std::find_if(rest.begin(), rest.end(), is_space) != rest.end())
        throw Error("'" + std::string(line) + "': one descriptor a line, with no space in it");
      add_descriptor(family, rest, out);
    } catch (const Error& e) {
      bad.push_back(where + e.what());
    }
  }
  if (bad.empty() && out.empty())
    throw Error(std::string(origin) + ": no descriptor in the file (one '<family> <descriptor>' a line, e.g. "
                "'gemm m:64/n:10/k:512')");
  if (!bad.empty()) {
    std::string message = std::string(origin) + ": " + std::to_string(bad.size()) + " bad line" +
                          (bad.size() == 1 ? "" : "s") + ", nothing run:";
    // Every bad line, up to a thousand (a file that is no batch file at all
    // would otherwise make a message as large as itself).
    constexpr std::size_t kMaxListed = 1000;
    for (std::size_t i = 0; i < bad.size() && i < kMaxListed; ++i) message.append("\n  ").append(bad[i]);
    if (bad.size() > kMaxListed) message.append("\n  ... and " + std::to_string(bad.size() - kMaxListed) + " more");
    throw Error(message);
  }
  return out;
}

}  // namespace dlb::bench
