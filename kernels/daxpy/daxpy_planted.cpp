// The planted-slowdown switch of daxpy_loop (daxpy_cpu.cpp), as data: only
// this file is compiled differently in the regression-tracking test build.
#ifndef DLB_PLANTED_SLOWDOWN
#define DLB_PLANTED_SLOWDOWN 0
#endif

namespace dlb {

extern const bool kPlantedSlowdown = DLB_PLANTED_SLOWDOWN != 0;

}  // namespace dlb
