#include "kernels/common/device_bytes.h"

#include <algorithm>

namespace dlb {

DeviceByteCount& DeviceByteCount::process() {
  // Never destroyed: a DeviceBuffer of static storage may be freed after
  // any static count would be.
  static auto* const count = new DeviceByteCount;
  return *count;
}

void DeviceByteCount::allocated(const void* p, std::size_t bytes) {
  if (p == nullptr) return;
  const std::lock_guard lock(mutex_);
  auto [it, inserted] = sizes_.try_emplace(p, bytes);
  if (!inserted) {
    // The same address again without a free in between: only the driver
    // can hand it out twice, so the old allocation is gone; replace it.
    live_ -= static_cast<std::int64_t>(it->second);
    it->second = bytes;
  }
  live_ += static_cast<std::int64_t>(bytes);
  for (DeviceBytePeak* w : watches_) w->peak_ = std::max(w->peak_, live_);
}

bool DeviceByteCount::freed(const void* p) {
  if (p == nullptr) return false;
  const std::lock_guard lock(mutex_);
  const auto it = sizes_.find(p);
  if (it == sizes_.end()) return false;
  live_ -= static_cast<std::int64_t>(it->second);
  sizes_.erase(it);
  return true;
}

std::int64_t DeviceByteCount::live_bytes() const {
  const std::lock_guard lock(mutex_);
  return live_;
}

std::int64_t DeviceByteCount::allocations() const {
  const std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(sizes_.size());
}

DeviceBytePeak::DeviceBytePeak(DeviceByteCount& count) : count_(count) {
  const std::lock_guard lock(count_.mutex_);
  start_ = peak_ = count_.live_;
  count_.watches_.push_back(this);
}

DeviceBytePeak::~DeviceBytePeak() {
  const std::lock_guard lock(count_.mutex_);
  std::erase(count_.watches_, this);
}

std::int64_t DeviceBytePeak::start_bytes() const {
  const std::lock_guard lock(count_.mutex_);
  return start_;
}

std::int64_t DeviceBytePeak::peak_bytes() const {
  const std::lock_guard lock(count_.mutex_);
  return peak_;
}

std::int64_t DeviceBytePeak::rise() const {
  const std::lock_guard lock(count_.mutex_);
  return peak_ - start_;
}

}  // namespace dlb
