// The fixed-algorithm cuDNN variants, for the variant table (conv.cpp):
// cudnnConvolutionForward with one algorithm, chosen by the template
// argument so that each row of the table is a plain function pointer.
#pragma once

#include <cudnn.h>

#include "kernels/conv/conv.h"

namespace dlb {

Run prepare_conv_cudnn_algorithm(const ConvArgs& args, const Exec& exec, cudnnConvolutionFwdAlgo_t algo);

template <cudnnConvolutionFwdAlgo_t Algo>
Run prepare_conv_cudnn_fixed(const ConvArgs& args, const Exec& exec) {
  return prepare_conv_cudnn_algorithm(args, exec, Algo);
}

}  // namespace dlb
