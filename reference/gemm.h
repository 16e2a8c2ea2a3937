// Reference GEMM, C = A * B with A [m,k] and B [k,n] row-major, accumulated
// in double. Full products are O(mnk), too slow for the large shapes the
// benchmarks time, so the reference can compute only some rows of C: a spot
// check of a large product compares those rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dlb::ref {

// Rows `rows` of C (in that order), each of n values.
std::vector<double> gemm_rows(const float* a, const float* b, std::int64_t n, std::int64_t k,
                              std::span<const std::int64_t> rows);

// The integer version: rows of C = (A - a_zero_point) * B for A [m,k] u8 and
// B [k,n] s8, exact in 64-bit integers.
std::vector<std::int64_t> gemm_rows_u8s8(const std::uint8_t* a, std::int32_t a_zero_point, const std::int8_t* b,
                                         std::int64_t n, std::int64_t k, std::span<const std::int64_t> rows);

// `count` rows spread over [0, m): first, last and evenly spaced between.
std::vector<std::int64_t> spread_rows(std::int64_t m, std::int64_t count);

}  // namespace dlb::ref
