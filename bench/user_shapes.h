// The problems the user gave on the command line, for the families to
// register: the descriptor flags (--conv=, --softmax=, --gemm=, --daxpy=,
// --copy=, --net=; each repeatable) and batch files (--shapes=FILE; see
// bench/descriptor.h for both). As benchdnn does, a descriptor given alone
// runs that problem alone: with any of them and no --suite, only their
// cases are registered (the suite "descriptors", suites.h). With --suite
// given as well, the suite's cases are registered too (scripts/bench gives
// --suite=default only where no descriptor is given).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/descriptor.h"
#include "bench/harness.h"

namespace dlb::bench {

// Takes the descriptor flags and --shapes out of config.flags, parses them
// (every bad line of a batch file at once), and refuses a problem that
// would not fit in this machine's memory; then, where any was given and no
// --suite, selects the user's shapes alone (select_user_shapes_only).
// Called by main before it takes --suite. Throws dlb::Error.
void take_user_shapes(Config& config);

// What take_user_shapes found (empty before).
const Descriptors& user_shapes();

// Whether a family registers its own shapes, filtered by the suite, beside
// the user's: no descriptor was given, or --suite was given with them.
bool own_shapes_wanted();

// Whether `shape` is among the user's: a family skips its own copy of it.
template <class Shape>
bool is_user_shape(const std::vector<Shape>& user, const Shape& shape) {
  return std::find(user.begin(), user.end(), shape) != user.end();
}

// The batches a network family registers for `network` (as the case names
// begin: "resnet20", "resnet20_train"), each with whether it is the user's:
// the user's (--net=<network>/batch:B; registered whatever the suite), then
// `own` where own_shapes_wanted(), but those the user gave.
std::vector<std::pair<std::int64_t, bool>> net_batches(std::string_view network, std::span<const std::int64_t> own);

}  // namespace dlb::bench
