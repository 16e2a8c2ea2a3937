#include "kernels/nn/train/walked_step.h"

#include <utility>

#include "kernels/common/error.h"

namespace dlb::nn {

WalkedStep::WalkedStep(const Network& net, std::int64_t batch, Sgd sgd, std::string who)
    : net_(net), batch_(batch), sgd_(sgd), who_(std::move(who)) {
  DLB_REQUIRE(batch_ >= 1, who_ + ": batch " + std::to_string(batch_) + " is not positive");
  params_ = trainable_params(net_);
  flow_ = train_flow(net_);
  log_probs_.assign(static_cast<std::size_t>(batch_ * net_.layers[flow_.logits].out_size()), 0.0f);
}

double WalkedStep::forward(const float* x, const std::uint8_t* labels) {
  DLB_REQUIRE(x != nullptr && labels != nullptr, who_ + ": no input or no labels");
  before_call();
  check_labels(net_, labels, batch_);
  set_input(x);
  labels_ = labels;
  walk_.forward();
  forward_done_ = true;
  backward_done_ = false;
  return loss_;
}

void WalkedStep::backward() {
  DLB_REQUIRE(forward_done_, who_ + ": backward without a forward");
  before_call();
  walk_.backward();
  gradients_changed();
  backward_done_ = true;
}

void WalkedStep::update() {
  DLB_REQUIRE(backward_done_, who_ + ": update without a backward");
  before_call();
  apply_sgd();
  backward_done_ = false;
}

std::vector<std::pair<std::string, double>> WalkedStep::profile(const float* x, const std::uint8_t* labels,
                                                                int steps) {
  forward(x, labels);  // checks the labels, sets the input
  time_parts(true);
  auto counters = profile_walk(walk_, steps, [this] { apply_sgd(); });
  time_parts(false);
  for (auto& part : parts(steps)) counters.push_back(std::move(part));
  gradients_changed();
  backward_done_ = false;  // the last profiled forward stands: backward may follow
  return counters;
}

void WalkedStep::loss_forward(const float* logits) {
  loss_ = log_softmax_nll(logits, labels_, batch_, net_.layers[flow_.logits].out_size(), log_probs_.data());
}

void WalkedStep::loss_backward(float* dlogits) const {
  nll_gradient(log_probs_.data(), labels_, batch_, net_.layers[flow_.logits].out_size(), dlogits);
}

PlainParamsStep::PlainParamsStep(const Network& net, std::int64_t batch, Sgd sgd, std::string who)
    : WalkedStep(net, batch, sgd, std::move(who)) {
  for (const auto& t : params_) {
    const auto values = param_values(net_, t);
    p_.emplace_back(values.begin(), values.end());
    g_.emplace_back(values.size(), 0.0f);
    v_.emplace_back(values.size(), 0.0f);
  }
}

void PlainParamsStep::apply_sgd() {
  for (std::size_t j = 0; j < p_.size(); ++j)
    sgd_update(p_[j].data(), g_[j].data(), v_[j].data(), static_cast<std::int64_t>(p_[j].size()), sgd_);
}

void PlainParamsStep::count_params(TrainMemory& m) const {
  const auto bytes = [](const std::vector<float>& vec) { return static_cast<std::int64_t>(vec.size() * sizeof(float)); };
  for (std::size_t j = 0; j < p_.size(); ++j)
    m.weights += bytes(p_[j]), m.gradients += bytes(g_[j]), m.optimizer += bytes(v_[j]);
}

}  // namespace dlb::nn
