// The loader inside the training step (issue 35): batches of a data set in a
// given order (load_batch: normalization, crop with padding, flip), either
// loaded in the calling thread when asked for (workers = 0, PyTorch's
// DataLoader with num_workers=0) or prepared ahead by `workers` threads of
// their own while the step runs (num_workers > 0): worker w loads batches
// w, w + workers, w + 2 workers, ..., each whole, into a ring of
// workers * prefetch batch buffers (DataLoader's prefetch_factor, 2), and
// next() hands them out in order, waiting only when the next one is not
// ready yet. The batches are the same whatever the worker count (load_batch
// is a pure function of the indices and the seed).
//
// The batch next() returns stays valid until the following next() (the
// step's forward and backward read it); its buffer is then refilled. The
// order is walked cyclically: batch b holds order[(b mod batches()) batch,
// ...+ batch); the last partial batch of a pass is dropped.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "kernels/nn/data/dataset.h"
#include "kernels/nn/data/loader.h"

namespace dlb::nn {

class BatchLoader {
 public:
  // Throws dlb::Error for a batch below 1 or above the order's length, an
  // index outside the data set, a negative worker count, a prefetch below 1,
  // or what load_batch rejects (checked on the first batch, in the
  // constructor's thread).
  BatchLoader(const Dataset& data, std::vector<std::int64_t> order, std::int64_t batch, const BatchFormat& format,
              const Augment& augment, std::uint64_t seed, int workers, int prefetch = 2);
  ~BatchLoader();  // stops the workers and joins them
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  struct Batch {
    const float* x = nullptr;              // [batch, c, h, w]
    const std::uint8_t* labels = nullptr;  // [batch]
    std::int64_t number = 0;               // 0, 1, 2, ... (position in the pass: number mod batches())
  };
  // The next batch; releases the previous one. Rethrows a worker's error.
  Batch next();

  std::int64_t batch() const { return batch_; }
  std::int64_t batches() const { return static_cast<std::int64_t>(order_.size()) / batch_; }
  int workers() const { return workers_; }

 private:
  void load(std::int64_t number, std::size_t slot);
  void work(int w);

  const Dataset& data_;
  std::vector<std::int64_t> order_;
  std::int64_t batch_;
  BatchFormat format_;
  Augment augment_;
  std::uint64_t seed_;
  int workers_;
  std::size_t slots_;
  std::vector<std::vector<float>> x_;
  std::vector<std::vector<std::uint8_t>> labels_;
  std::vector<std::int64_t> filled_;  // per slot: the batch number it holds, -1: none
  std::int64_t next_ = 0;             // the batch number next() returns
  std::int64_t released_ = 0;         // batches below this number may be overwritten
  std::mutex mutex_;
  std::condition_variable ready_, free_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace dlb::nn
