// bench --trace's writer (bench/trace.h) on a synthetic pass: the host
// thread's track and the GPU stream's, their names, the layers in order,
// and on the stream the layers' device times end to end, never
// overlapping, as Perfetto reads them (integer nanoseconds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/trace.h"

namespace dlb::bench {
namespace {

const std::vector<TraceLayer> kLayers = {
    {"conv1", "conv1 conv+bias+relu 3->16 3x3", "conv"},
    {"stage1.0.conv1", "stage1.0.conv1 conv+bias+relu 16->16 3x3", "conv"},
    {"pool", "pool global_avg_pool", "global_avg_pool"},
    {"fc", "fc fc 64->10", "fc"},
};

// cudaEventElapsedTime's answer: a float of milliseconds, the time between
// the two events' timestamps at the timer's resolution (0.5 us here).
double elapsed_s(double from_us, double to_us) {
  const double quantized_us = std::round((to_us - from_us) / 0.5) * 0.5;
  return static_cast<double>(static_cast<float>(quantized_us * 1e-3)) * 1e-3;
}

// A GPU pass as LayerTimer measures it: events before the first layer and
// after each, at these device times (us from the first event); the layers'
// starts and times are elapsed times between events, each rounded on its own.
PassTimes gpu_pass(double begin_s, const std::vector<double>& events_us) {
  PassTimes t;
  t.begin_s = begin_s;
  const std::size_t n = events_us.size() - 1;
  for (std::size_t i = 0; i < n; ++i) {
    t.host_start_s.push_back(1e-6 * (2.0 + 3.0 * static_cast<double>(i)));
    t.host_s.push_back(2.5e-6);
    t.start_s.push_back(elapsed_s(events_us[0], events_us[i]));
    t.layer_s.push_back(elapsed_s(events_us[i], events_us[i + 1]));
  }
  t.device_origin_s = 1e-6 * (2.0 + 3.0 * static_cast<double>(n));  // the hold released after the last launch
  t.device_end_s = elapsed_s(events_us[0], events_us[n]);
  return t;
}

// Perfetto's reading of a timestamp in microseconds.
std::int64_t ns(const nlohmann::json& us) { return std::llround(us.get<double>() * 1e3); }

std::vector<nlohmann::json> spans(const nlohmann::json& trace, int pid, int tid) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid) out.push_back(e);
  return out;
}

std::map<std::pair<int, int>, std::string> thread_names(const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::string> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") out[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  return out;
}

TEST(TraceWriter, AGpuPassHasItsStreamTrackEndToEnd) {
  const double origin = 100.0;
  TraceWriter w(origin);
  w.process(2, "steady passes", true);
  // Layer boundaries where the separately rounded elapsed times disagree:
  // 10.3 us rounds to 10.5, 20.6 to 20.5, the layers 10.3 each to 10.5.
  const std::vector<double> events_us = {0.0, 10.3, 20.6, 30.9, 41.2};
  const PassTimes p1 = gpu_pass(origin + 0.001, events_us);
  const PassTimes p2 = gpu_pass(origin + 0.002, {0.0, 5.2, 9.9, 15.4, 20.0});
  w.pass(2, kLayers, p1, 1, true);
  w.pass(2, kLayers, p2, 2, true);
  const nlohmann::json trace = w.json({{"case", "synthetic"}});

  // Both tracks, named.
  const auto names = thread_names(trace);
  EXPECT_EQ(names.at({2, TraceWriter::kHost}), "host thread (issuing)");
  EXPECT_EQ(names.at({2, TraceWriter::kStream}), "GPU stream");
  const auto host = spans(trace, 2, TraceWriter::kHost);
  const auto stream = spans(trace, 2, TraceWriter::kStream);
  ASSERT_EQ(stream.size(), 2 * kLayers.size());
  // The host track: each layer's issuing, then the pass.
  std::vector<std::string> host_names;
  for (const auto& e : host) host_names.push_back(e["name"]);
  EXPECT_EQ(host_names, (std::vector<std::string>{"conv1", "stage1.0.conv1", "pool", "fc", "pass 1", "conv1",
                                                  "stage1.0.conv1", "pool", "fc", "pass 2"}));
  for (const auto& e : host) {
    if (e["cat"] != "pass") {
      EXPECT_EQ(e["cat"], "launch");
    }
  }

  // The stream: the layers in order, each starting where the one before
  // ended, never before; the pass's device time end to end.
  for (std::size_t pass = 0; pass < 2; ++pass) {
    const PassTimes& t = pass == 0 ? p1 : p2;
    SCOPED_TRACE("pass " + std::to_string(pass + 1));
    const std::int64_t first = ns(stream[pass * kLayers.size()]["ts"]);
    EXPECT_EQ(first, std::llround((t.begin_s + t.device_origin_s - origin) * 1e9));
    std::int64_t end = first;
    for (std::size_t i = 0; i < kLayers.size(); ++i) {
      const auto& e = stream[pass * kLayers.size() + i];
      EXPECT_EQ(e["name"], kLayers[i].name);
      EXPECT_EQ(e["cat"], "layer");
      EXPECT_EQ(e["args"]["label"], kLayers[i].label);
      EXPECT_EQ(e["args"]["pass"], static_cast<int>(pass + 1));
      EXPECT_GE(ns(e["ts"]), end) << e["name"] << " begins before the layer before it ends";
      EXPECT_EQ(ns(e["ts"]), end) << e["name"] << ": a gap the events did not measure";
      EXPECT_GE(ns(e["dur"]), 0);
      // Each layer's time within the timer's resolution of its own events' elapsed time.
      EXPECT_NEAR(e["dur"].get<double>(), t.layer_s[i] * 1e6, 0.5 + 1e-3) << e["name"];
      end = ns(e["ts"]) + ns(e["dur"]);
    }
    EXPECT_EQ(end - first, std::llround(t.device_end_s * 1e9)) << "the layers do not add up to the pass";
  }
  // The second pass after the first, on both tracks.
  EXPECT_GT(ns(stream[kLayers.size()]["ts"]), ns(stream[kLayers.size() - 1]["ts"]));
}

TEST(TraceWriter, ACpuPassHasNoStreamTrack) {
  TraceWriter w(0.0);
  w.process(1, "first pass", false);
  PassTimes t;
  t.begin_s = 1.0;
  for (std::size_t i = 0; i < kLayers.size(); ++i) {
    t.host_start_s.push_back(1e-3 * static_cast<double>(i));
    t.host_s.push_back(1e-3);
  }
  t.start_s = t.host_start_s;
  t.layer_s = t.host_s;
  w.pass(1, kLayers, t, 0, false);
  const nlohmann::json trace = w.json({});
  const auto names = thread_names(trace);
  EXPECT_EQ(names.size(), 1u);
  EXPECT_EQ(names.at({1, TraceWriter::kHost}), "host thread");
  EXPECT_TRUE(spans(trace, 1, TraceWriter::kStream).empty());
  const auto host = spans(trace, 1, TraceWriter::kHost);
  ASSERT_EQ(host.size(), kLayers.size() + 1);
  std::int64_t end = 0;
  for (std::size_t i = 0; i < kLayers.size(); ++i) {
    EXPECT_EQ(host[i]["name"], kLayers[i].name);
    EXPECT_EQ(host[i]["cat"], "layer");
    EXPECT_GE(ns(host[i]["ts"]), end);
    end = ns(host[i]["ts"]) + ns(host[i]["dur"]);
  }
  EXPECT_EQ(host.back()["name"], "pass 0");
  EXPECT_EQ(ns(host.back()["ts"]) + ns(host.back()["dur"]), end);
}

}  // namespace
}  // namespace dlb::bench
