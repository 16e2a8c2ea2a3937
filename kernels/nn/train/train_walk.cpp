#include "kernels/nn/train/train_walk.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "kernels/common/error.h"

namespace dlb::nn {

double log_softmax_nll(const float* logits, const std::uint8_t* labels, std::int64_t batch, std::int64_t classes,
                       float* log_probs) {
  double loss = 0;
  for (std::int64_t n = 0; n < batch; ++n) {
    const float* row = logits + n * classes;
    const float m = *std::max_element(row, row + classes);
    double sum = 0;
    for (std::int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - m);
    const double shift = m + std::log(sum);
    for (std::int64_t j = 0; j < classes; ++j) log_probs[n * classes + j] = static_cast<float>(row[j] - shift);
    loss -= log_probs[n * classes + labels[n]];
  }
  return loss / static_cast<double>(batch);
}

std::vector<int> share_gradient_buffers(const std::vector<int>& first_write, const std::vector<int>& read,
                                        std::size_t& buffers) {
  std::vector<int> order;
  for (std::size_t j = 0; j < first_write.size(); ++j)
    if (first_write[j] >= 0) order.push_back(static_cast<int>(j));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return first_write[static_cast<std::size_t>(a)] > first_write[static_cast<std::size_t>(b)];
  });
  std::vector<int> buf(first_write.size(), -1), last_read;  // last_read: per buffer, when its occupant is read
  for (const int j : order) {
    const auto u = static_cast<std::size_t>(j);
    for (std::size_t q = 0; q < last_read.size() && buf[u] < 0; ++q)
      if (last_read[q] > first_write[u]) buf[u] = static_cast<int>(q);
    if (buf[u] < 0) {
      buf[u] = static_cast<int>(last_read.size());
      last_read.push_back(0);
    }
    last_read[static_cast<std::size_t>(buf[u])] = read[u];
  }
  buffers = last_read.size();
  return buf;
}

void check_labels(const Network& net, const std::uint8_t* labels, std::int64_t batch) {
  DLB_REQUIRE(labels != nullptr, "training step: no labels");
  const std::int64_t classes = net.classes;
  for (std::int64_t n = 0; n < batch; ++n)
    if (labels[n] >= classes)
      throw Error("training step: label " + std::to_string(labels[n]) + " of image " + std::to_string(n) +
                  " is not a class of " + net.name + " (0.." + std::to_string(classes - 1) + ")");
}

void nll_gradient(const float* log_probs, const std::uint8_t* labels, std::int64_t batch, std::int64_t classes,
                  float* dy) {
  const float inv = 1.0f / static_cast<float>(batch);
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t j = 0; j < classes; ++j) {
      const std::int64_t k = n * classes + j;
      dy[k] = (std::exp(log_probs[k]) - (j == labels[n] ? 1.0f : 0.0f)) * inv;
    }
}

void sgd_update(float* p, const float* g, float* v, std::int64_t n, const Sgd& sgd) {
  const float lr = static_cast<float>(sgd.lr), mu = static_cast<float>(sgd.momentum),
              wd = static_cast<float>(sgd.weight_decay);
#pragma omp parallel for simd schedule(static) if (n > 16384)
  for (std::int64_t i = 0; i < n; ++i) {
    const float grad = wd != 0.0f ? g[i] + wd * p[i] : g[i];
    v[i] = mu * v[i] + grad;
    p[i] -= lr * v[i];
  }
}

TrainCalls layer_calls(const TrainIo& io, Run forward, Run backward_data, Run backward_weights) {
  TrainCalls c;
  c.forward = std::move(forward);
  c.backward_weights = std::move(backward_weights);
  if (io.need_dx) c.backward_data = std::move(backward_data);
  return c;
}

TrainFlow train_flow(const Network& net) {
  const auto& ls = net.layers;
  DLB_REQUIRE(!ls.empty(), "training step: " + net.name + " has no layers");
  DLB_REQUIRE(ls.size() >= 2 || ls.back().kind != LayerKind::log_softmax,
              "training step: " + net.name + " is only a log_softmax");
  TrainFlow f;
  f.logits = ls.back().kind == LayerKind::log_softmax ? ls.size() - 2 : ls.size() - 1;
  const std::size_t n = f.logits + 1;
  f.readers.assign(n, 0);
  f.needed.assign(n, false);
  f.first_write.assign(n, -1);
  std::vector<bool> has_params(ls.size(), false);
  for (std::size_t i = 0; i < n; ++i)
    has_params[i] = ls[i].kind == LayerKind::conv || ls[i].kind == LayerKind::fc;
  for (std::size_t i = 0; i < n; ++i) {
    f.needed[i] = has_params[i];
    for (const int j : {ls[i].input, ls[i].residual}) {
      if (j < 0) continue;
      const auto u = static_cast<std::size_t>(j);
      ++f.readers[u];
      f.needed[i] = f.needed[i] || f.needed[u];
      if (f.needed[u]) f.first_write[u] = std::max(f.first_write[u], static_cast<int>(i));
    }
  }
  f.first_write[f.logits] = static_cast<int>(n);  // the loss
  return f;
}

namespace {

// by_kind's functions for a TrainLayers backend.
struct Kinds {
  TrainLayers& b;
  TrainCalls conv(const Layer& l, const TrainIo& io) const { return b.conv(l, io); }
  TrainCalls fc(const Layer& l, const TrainIo& io) const { return b.fc(l, io); }
  TrainCalls max_pool(const Layer& l, const TrainIo& io) const { return b.max_pool(l, io); }
  TrainCalls global_avg_pool(const Layer& l, const TrainIo& io) const { return b.global_avg_pool(l, io); }
  [[noreturn]] TrainCalls log_softmax(const Layer& l, const TrainIo&) const {
    throw Error("training step: layer '" + l.name + "': a log_softmax before the last layer");
  }
};

void run_if(const Run& r) {
  if (r) r();
}

}  // namespace

TrainWalk walk_train(const Network& net, const TrainFlow& flow, TrainLayers& backend) {
  TrainWalk w;
  const Kinds kinds{backend};
  const auto io_of = [&](std::size_t i) {
    const Layer& l = net.layers[i];
    TrainIo io{i};
    if (l.input >= 0) {
      const auto u = static_cast<std::size_t>(l.input);
      io.need_dx = flow.needed[u];
      io.add_to_input = io.need_dx && flow.first_write[u] != static_cast<int>(i);
    }
    if (l.residual >= 0) {
      const auto u = static_cast<std::size_t>(l.residual);
      io.need_dres = flow.needed[u];
      io.add_to_residual = io.need_dres && flow.first_write[u] != static_cast<int>(i);
    }
    return io;
  };
  for (std::size_t i = 0; i <= flow.logits; ++i) w.layers.push_back(by_kind(kinds, net.layers[i], io_of(i)));
  w.loss = backend.loss(TrainIo{flow.logits});
  return w;
}

void TrainWalk::forward() const {
  for (const auto& l : layers) run_if(l.forward);
  run_if(loss.forward);
}

void TrainWalk::backward() const {
  run_if(loss.backward_data);
  for (std::size_t i = layers.size(); i-- > 0;) {
    run_if(layers[i].backward);
    run_if(layers[i].backward_weights);
    run_if(layers[i].backward_data);
  }
}

std::vector<std::pair<std::string, Run>> TrainWalk::timed_calls() const {
  std::vector<std::pair<std::string, Run>> out;
  const auto add = [&](std::size_t i, const char* part, const Run& r) {
    if (r) out.emplace_back("layer_us." + std::to_string(i) + "." + part, r);
  };
  for (std::size_t i = 0; i < layers.size(); ++i) add(i, "forward", layers[i].forward);
  add(layers.size(), "forward", loss.forward);
  add(layers.size(), "backward_data", loss.backward_data);
  for (std::size_t i = layers.size(); i-- > 0;) {
    add(i, "backward", layers[i].backward);
    add(i, "backward_weights", layers[i].backward_weights);
    add(i, "backward_data", layers[i].backward_data);
  }
  return out;
}

std::vector<std::pair<std::string, double>> profile_walk(const TrainWalk& w, int steps, const Run& update) {
  DLB_REQUIRE(steps >= 1, "training step profile: steps " + std::to_string(steps) + " is below 1");
  auto calls = w.timed_calls();
  calls.emplace_back("update_us", update);
  std::vector<std::vector<double>> us(calls.size());
  for (int s = 0; s < steps; ++s)
    for (std::size_t c = 0; c < calls.size(); ++c) {
      const auto t0 = std::chrono::steady_clock::now();
      calls[c].second();
      us[c].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  std::vector<std::pair<std::string, double>> out;
  double total = 0;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    auto& v = us[c];
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    const double median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    out.emplace_back(calls[c].first, median);
    total += median;
  }
  out.emplace_back("profiled_us", total);
  out.emplace_back("profile_steps", steps);
  return out;
}

}  // namespace dlb::nn
