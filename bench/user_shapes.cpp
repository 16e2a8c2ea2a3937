#include "bench/user_shapes.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/suites.h"
#include "kernels/common/error.h"

namespace dlb::bench {
namespace {

// The descriptors' flags, listed by --help (the fields and their limits are
// in bench/descriptor.h and docs/architecture.md, "Descriptors").
DLB_BENCH_FLAG(conv, "conv", "DESCRIPTOR[,DESCRIPTOR...]", "--conv=n64c16h32w32k16r3s3stride1pad1",
               "conv cases for these shapes (fields n c h w k r s stride pad; required n c h k r; "
               "each tensor < 2^31 elements); repeatable");
DLB_BENCH_FLAG(softmax, "softmax", "rows:R/cols:C", "--softmax=rows:128/cols:1024",
               "softmax and log_softmax cases for this shape (rows, cols 1 to 2^31-1); repeatable");
DLB_BENCH_FLAG(gemm, "gemm", "m:M/n:N/k:K", "--gemm=m:64/n:128/k:9216",
               "gemm cases, every precision, for this shape (m, n, k 1 to 2^31-1); repeatable");
DLB_BENCH_FLAG(daxpy, "daxpy", "n:N", "--daxpy=n:1M", "daxpy cases for n elements (1 to 2^31-1; suffix K M G); repeatable");
DLB_BENCH_FLAG(copy, "copy", "bytes:B", "--copy=bytes:64M",
               "copy cases (GPU only) for B bytes (1 to 1024G; suffix K M G); repeatable");
DLB_BENCH_FLAG(net, "net", "NETWORK/batch:B", "--net=resnet20/batch:8",
               "network cases at batch B: resnet20, mnist_cnn, mnist_lenet (inference, B <= 10000) or "
               "resnet20_train, mnist_cnn_train, mnist_lenet_train (training step, B <= 60000); repeatable");
DLB_BENCH_FLAG(shapes, "shapes", "FILE", "--shapes=shapes/resnet20_conv.txt",
               "descriptors from FILE, one '<family> <descriptor>' a line, '#' comments; a bad line stops the "
               "run; repeatable. Descriptors without --suite run alone (no suite case)");

Descriptors& shapes() {
  static Descriptors d;
  return d;
}
bool g_own_shapes = true;

// A batch file of a million lines is some 30 MB; past this it is not one
// (and /dev/zero must not be read forever).
constexpr std::size_t kMaxShapesFileBytes = std::size_t{64} << 20;

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("--shapes=" + path + ": a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--shapes=" + path + ": cannot read it (" + std::strerror(errno) + ")");
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxShapesFileBytes)
      throw Error("--shapes=" + path + ": larger than 64 MiB, not a batch file of descriptors");
  }
  if (in.bad()) throw Error("--shapes=" + path + ": cannot read it");
  return text;
}

double host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  return text;
}

// A problem whose buffers alone would not fit the machine's memory fails
// here, in a line, rather than in the middle of a run.
void check_fits(std::string_view family, const std::string& descriptor, double bytes, const char* what,
                double memory) {
  if (memory <= 0.0 || bytes <= memory) return;
  throw Error(std::string(family) + " " + descriptor + ": needs at least " + gigabytes(bytes) + " of host memory (" +
              what + "), this machine has " + gigabytes(memory));
}

void check_memory(const Descriptors& d) {
  const double memory = host_memory_bytes();
  for (const auto& s : d.conv) {
    const double bytes = 4.0 * static_cast<double>(s.x_size() + s.w_size()) + 12.0 * static_cast<double>(s.y_size());
    check_fits("conv", s.descriptor(), bytes, "x, w, y in fp32 and the double reference of y", memory);
  }
  for (const auto& s : d.softmax)
    check_fits("softmax", s.descriptor(), s.host_bytes(), "x, y in fp32 and the double reference", memory);
  for (const auto& s : d.gemm) check_fits("gemm", s.descriptor(), s.host_bytes(), "A, B, C in fp32", memory);
  for (const auto& s : d.daxpy) check_fits("daxpy", s.descriptor(), s.host_bytes(), "x, y and the reference", memory);
  for (const auto& s : d.copy) check_fits("copy", s.descriptor(), s.host_bytes(), "the pipeline's input and output", memory);
}

// Without a GPU the copy family registers nothing: say so rather than run
// nothing in silence.
void note_copy_without_gpu(Config& config) {
  if (config.gpu || shapes().copy.empty()) return;
  for (const auto& s : shapes().copy)
    std::fprintf(stderr, "bench: --copy=%s: copy is GPU only: no case registered without a GPU\n",
                 s.descriptor().c_str());
}
// Registered as a family so that it runs where the families register; it
// registers no case, so --list_families leaves it out.
DLB_BENCH_FAMILY(note_copy_without_gpu, "no cases: says that --copy= registers nothing without a GPU");

}  // namespace

void take_user_shapes(Config& config) {
  Descriptors d;
  for (const std::string_view family : kDescriptorFamilies)
    for (std::string v = take_flag(config, family); !v.empty(); v = take_flag(config, family))
      add_descriptor(family, v, d);
  for (std::string path = take_flag(config, "shapes"); !path.empty(); path = take_flag(config, "shapes")) {
    const Descriptors file = parse_shapes_file(read_file(path), path);
    for (const auto& s : file.conv) add_descriptor("conv", s.descriptor(), d);
    for (const auto& s : file.softmax) add_descriptor("softmax", s.descriptor(), d);
    for (const auto& s : file.gemm) add_descriptor("gemm", s.descriptor(), d);
    for (const auto& s : file.daxpy) add_descriptor("daxpy", s.descriptor(), d);
    for (const auto& s : file.copy) add_descriptor("copy", s.descriptor(), d);
    for (const auto& s : file.net) add_descriptor("net", s.descriptor(), d);
  }
  check_memory(d);
  const bool suite_given = std::any_of(config.flags.begin(), config.flags.end(),
                                       [](const std::string& f) { return f.starts_with("--suite="); });
  g_own_shapes = d.empty() || suite_given;
  if (!g_own_shapes) select_user_shapes_only();
  shapes() = std::move(d);
}

const Descriptors& user_shapes() { return shapes(); }

bool own_shapes_wanted() { return g_own_shapes; }

std::vector<std::pair<std::int64_t, bool>> net_batches(std::string_view network, std::span<const std::int64_t> own) {
  std::vector<std::pair<std::int64_t, bool>> out;
  for (const NetShape& s : user_shapes().net)
    if (s.network == network) out.emplace_back(s.batch, true);
  if (own_shapes_wanted())
    for (const std::int64_t batch : own)
      if (!is_user_shape(user_shapes().net, NetShape{std::string(network), batch})) out.emplace_back(batch, false);
  return out;
}

}  // namespace dlb::bench
