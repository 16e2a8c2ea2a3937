// Convolution problems: the default shapes, the --conv descriptor, and one
// problem set up for one variant (seeded x and w, the reference output, the
// prepared call). The benchmark validates and then times it; the tests
// validate it over the default and odd shapes.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/conv/conv.h"
#include "reference/compare.h"

namespace dlb {

struct NamedConvShape {
  std::string name;  // where the shape comes from: "resnet20 stage2 16->32 s2"
  ConvShape shape;
};

// The default shapes: every distinct convolution of the CIFAR ResNet20 of He
// et al. (option A shortcuts: zero-padded identity, so no 1x1 projection
// convolutions) and the two of the MNIST CNN, each at batch 1 and 64.
const std::vector<NamedConvShape>& conv_default_shapes();

class ConvCase {
 public:
  ConvCase(const ConvVariant& variant, const ConvShape& shape);

  // y poisoned with NaN, one call, compared with the reference.
  ref::Comparison validate();
  // The timed call: the prepared one, or the one a _blocked variant reports.
  void run() { report_.timed_call ? report_.timed_call() : run_(); }
  const ExecContext& context() const { return ctx_; }
  const ConvReport& report() const { return report_; }
  double flops_per_call() const { return shape_.flops(); }

 private:
  const ConvVariant& variant_;
  ConvShape shape_;
  ExecContext ctx_;
  Operand<float> x_, w_, y_;
  ConvReport report_;
  Run run_;
};

}  // namespace dlb
