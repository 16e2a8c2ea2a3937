// softmax/<variant>/rows:<rows>/cols:<cols> and log_softmax/<variant>/...:
// row-wise (log-)softmax of a [rows, cols] fp32 matrix, for cols in
// {10, 128, 1024, 4096, 32768} in two regimes, plus one long row:
//   DRAM   rows = 2^26 / cols: x is 256 MiB (and y too), far past the caches
//   cache  rows = 2^17 / cols: x is 512 KiB, x + y about 1 MiB, in L2
//   rows:1/cols:1000000: one 4 MB row, which no row-parallel code can split
// or, with --softmax=rows:R/cols:C (bench/user_shapes.h), at that shape
// alone (with --suite given too: that shape and the suite's).
// The regimes are a CPU notion: GPU cases read through a buffer twice the
// size of L2 before each call (the default Timing), so on a GPU both regimes
// start from DRAM and differ only in size.
// Cases of one shape are registered next to each other so that their
// ratios come from the same minutes of a noisy machine. bytes_per_second
// counts 2 * rows * cols * 4 bytes (x read once, y written once) for every
// variant, naive included. CPU cases are bracketed by roofline/cpu_copy's
// kernel (time_memory_bound), on the variant's thread count: frac_of_ceiling
// is the case over copy measured in the same second on as many cores. Each case is validated first on the `mixed`
// input: random rows and, when there are at least 16, four special rows
// (+-1e4, masked entries, all masked but one, all equal).
#include <optional>
#include <utility>
#include <vector>

#include "bench/cases/softmax_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kDramElements = std::int64_t{1} << 26;
constexpr std::int64_t kCacheElements = std::int64_t{1} << 17;
constexpr std::int64_t kCols[] = {10, 128, 1024, 4096, 32768};
constexpr std::int64_t kLongRow = 1000000;

std::vector<SoftmaxShape> own_shapes() {
  std::vector<SoftmaxShape> out;
  for (std::int64_t elements : {kDramElements, kCacheElements})
    for (std::int64_t cols : kCols) out.push_back({elements / cols, cols});
  out.push_back({1, kLongRow});
  return out;
}

// The user's shapes (registered whatever the suite), then the family's own
// where wanted, but those the user gave.
std::vector<std::pair<SoftmaxShape, bool>> shapes() {
  std::vector<std::pair<SoftmaxShape, bool>> out;
  const auto& user = user_shapes().softmax;
  for (const SoftmaxShape& s : user) out.emplace_back(s, true);
  if (own_shapes_wanted())
    for (const SoftmaxShape& s : own_shapes())
      if (!is_user_shape(user, s)) out.emplace_back(s, false);
  return out;
}

void register_softmax(Config& config) {
  for (SoftmaxKind kind : {SoftmaxKind::softmax, SoftmaxKind::log_softmax}) {
    const auto variants = variants_to_run(softmax_variants(kind), config);
    for (const auto& [shape, user] : shapes()) {
      std::optional<SuiteBypass> bypass;
      if (user) bypass.emplace();
      const std::int64_t rows = shape.rows, cols = shape.cols;
      for (const SoftmaxVariant* variant : variants) {
        add_case(case_name(softmax_op_name(kind), variant->name, {{"rows", rows}, {"cols", cols}}), variant->device,
                 [variant, kind, rows, cols](benchmark::State& state) {
                   auto* c = validated_case<SoftmaxCase>(state, *variant, kind, rows, cols, SoftmaxInput::mixed);
                   if (c == nullptr) return;
                   time_memory_bound(state, [c] { c->run(); }, c->context(), c->bytes_per_call(),
                                     Ceiling::cpu_copy, variant->threads);
                 });
      }
    }
  }
}

DLB_BENCH_FAMILY(register_softmax,
                 "row-wise softmax and log-softmax, in cache and from DRAM, short rows to a million columns: "
                 "against the memory ceiling");

}  // namespace
}  // namespace dlb::bench
