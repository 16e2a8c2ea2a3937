#include "kernels/nn/walk.h"

#include <string>

#include "kernels/common/error.h"

namespace dlb::nn {

Run layer_call(LayerBackend& backend, const Layer& l, const LayerIo& io) {
  switch (l.kind) {
    case LayerKind::conv: return backend.conv(l, io);
    case LayerKind::fc: return backend.fc(l, io);
    case LayerKind::max_pool: return backend.max_pool(l, io);
    case LayerKind::global_avg_pool: return backend.global_avg_pool(l, io);
    case LayerKind::log_softmax: return backend.log_softmax(l, io);
  }
  throw Error(std::string("layer ") + l.name + ": unknown layer kind");
}

}  // namespace dlb::nn
