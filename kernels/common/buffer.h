// Owned, move-only memory for `count` elements of T. One class template for
// every kind of memory; the kind is a policy with allocate/deallocate:
//   HostBuffer<T>    64-byte aligned (a cache line, one AVX-512 register)
//   DeviceBuffer<T>, PinnedBuffer<T>, WriteCombinedBuffer<T>: cuda_resources.h
// Memory is uninitialized: fill it (fill_random, poison_nan) before use.
#pragma once

#include <cstddef>
#include <new>
#include <span>
#include <utility>

namespace dlb {

inline constexpr std::size_t kHostAlignment = 64;

template <class T, class Memory>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t count) : size_(count) {
    if (count > 0) data_ = static_cast<T*>(Memory::allocate(count * sizeof(T)));
  }
  Buffer(Buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  // Host-accessible memory only (not DeviceBuffer).
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  void release() noexcept {
    if (data_ != nullptr) Memory::deallocate(data_);
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

struct HostMemory {
  static void* allocate(std::size_t bytes) { return ::operator new(bytes, std::align_val_t(kHostAlignment)); }
  static void deallocate(void* p) noexcept { ::operator delete(p, std::align_val_t(kHostAlignment)); }
};

template <class T>
using HostBuffer = Buffer<T, HostMemory>;

}  // namespace dlb
