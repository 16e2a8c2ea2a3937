// What a row computes in, for the variant tables that have that column (the
// gemm table, GemmPrecision, and the network table, NetPrecision): one set of
// formats with one name each, so that both families' tables, case names and
// plots say a format the same way. tf32: fp32 inputs whose products are
// rounded to TF32 on tensor cores.
#pragma once

#include <string_view>

namespace dlb {

enum class Precision { f32, tf32, bf16, f16, s8 };

constexpr std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::f32: return "f32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::f16: return "f16";
    case Precision::s8: return "s8";
  }
  return "unknown";
}

}  // namespace dlb
