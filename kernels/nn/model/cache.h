// What network.cpp and calibration.cpp load once per process and keep (a
// network, its reference outputs, its calibration), by network name. Internal
// to kernels/nn.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace dlb::nn {

// The T of `name`, made by load() on the first call with that name.
template <class T, class Load>
const T& load_once(std::string_view name, Load load) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<T>, std::less<>> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(std::string(name), std::make_unique<T>(load())).first;
  return *it->second;
}

}  // namespace dlb::nn
