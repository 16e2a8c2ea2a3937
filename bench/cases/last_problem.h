// The seeded input and double-precision reference of the last problem a
// case type asked for, shared by every variant of it. The benchmark
// registers all variants of a shape next to each other, so a shape's seeding
// and reference (seconds for a 256 MiB softmax or a 1.5 GiB daxpy) are made
// once per shape instead of once per variant, with nothing else changed: each
// case still copies the input into its own buffers and is validated on its
// own output. One problem per case type is kept (the last), so memory stays
// bounded by the largest shape.
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace dlb {

// `key` names the problem completely (shape, input kind, seeds); `make()`
// builds it when the last one kept has another key.
template <class Problem, class Make>
std::shared_ptr<const Problem> last_problem(const std::string& key, Make&& make) {
  static std::string cached_key;
  static std::shared_ptr<const Problem> cached;
  if (!cached || cached_key != key) {
    cached.reset();  // free the old one before building the next
    cached_key.clear();
    cached = std::make_shared<const Problem>(std::forward<Make>(make)());
    cached_key = key;
  }
  return cached;
}

}  // namespace dlb
