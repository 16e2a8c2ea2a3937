// oneDNN's CPU engine and stream, one per process, for every oneDNN variant.
// Include only from code built with oneDNN (DLB_HAVE_ONEDNN).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace dlb {

dnnl::engine& onednn_engine();
// In-order stream on that engine. oneDNN here runs on OpenMP: execute() does
// the work before it returns, but call wait() anyway after executing.
dnnl::stream& onednn_stream();

}  // namespace dlb
