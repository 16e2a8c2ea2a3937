// oneDNN's CPU engine and stream, one per process, for every oneDNN variant.
// Include only from code built with oneDNN (DLB_HAVE_ONEDNN).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace dlb {

dnnl::engine& onednn_engine();
// In-order stream on that engine. oneDNN here runs on OpenMP: execute() does
// the work before it returns, but call wait() anyway after executing.
dnnl::stream& onednn_stream();

// What oneDNN computes correctly on this CPU, for the `available` of the
// variant rows that need it (a row is not registered where it is false).
// Asked once per process.
//
// bf16: oneDNN 2.6 has bf16 kernels on AVX-512 and up (native with
// AVX512-BF16 or AMX, emulated on plain AVX-512) and none on AVX2, where
// creating a bf16 primitive fails. Asked of oneDNN itself (a small bf16
// matmul), not of CPUID.
bool onednn_has_bf16();
// int8, exactly: u8 x s8 products summed in 32 bits. Without VNNI or AMX,
// oneDNN's int8 kernels multiply with vpmaddubsw, which adds each pair of
// u8 x s8 products into a saturating 16-bit lane (oneDNN's "Nuances of
// int8 computations"): 2 x 255 x 127 = 64,770 does not fit, and a sum is
// silently clipped (measured on a Zen 3, AVX2: the gemm family's exactness
// tests and ResNet20's logits both fail). True where the CPU has AVX-512
// VNNI or AMX int8, the ISAs whose kernels this tool has been run on;
// AVX-VNNI alone (no AVX-512) is left out, unverified.
bool onednn_int8_exact();

}  // namespace dlb
