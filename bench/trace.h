// The Chrome trace-event file of bench --trace (nn/infer/nn_layers.cpp): what one
// instrumented network pass becomes on the host thread's track and, on a
// GPU, the stream's. Plain data in, JSON out, so the format is tested on
// the CPU (tests/test_bench_trace.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlb::bench {

// One instrumented pass. Times in seconds; offsets from begin_s.
struct PassTimes {
  double begin_s = 0;                // steady clock at the pass's start
  std::vector<double> layer_s;       // each layer's time (CPU: clock; GPU: between its events)
  std::vector<double> start_s;       // each layer's start on the device's timeline (CPU: = host_start_s)
  std::vector<double> host_s;        // the host's time in each layer call (GPU: issuing it)
  std::vector<double> host_start_s;  // when the host began each call
  double device_origin_s = 0;        // GPU: when its timeline starts (the hold's release)
  double device_end_s = 0;           // GPU: the last layer's end on the device's timeline (its last event)
};

// What a trace names a layer by: its name (the slice), label and op (its arguments).
struct TraceLayer {
  std::string name, label, op;
};

// Chrome's trace-event format: complete events ("X") with microsecond
// timestamps from the trace's start, names on the process and thread tracks.
class TraceWriter {
 public:
  enum Track { kHost = 1, kStream = 2, kCopy = 3 };
  explicit TraceWriter(double origin_s) : origin_s_(origin_s) {}
  // Process `pid`'s name, and its tracks': the host thread, and on a GPU the
  // stream and the copies.
  void process(int pid, const std::string& name, bool gpu);
  void span(int pid, int tid, const std::string& name, const std::string& cat, double start_s, double dur_s,
            nlohmann::json args = nlohmann::json::object());
  // One pass's layers: host slices, and on the GPU the stream's.
  void pass(int pid, const std::vector<TraceLayer>& layers, const PassTimes& t, int index, bool gpu);
  // The file's content; `other` is its otherData.
  nlohmann::json json(const nlohmann::json& other) const;
  void write(const std::string& path, const nlohmann::json& other) const;

 private:
  void meta(int pid, int tid, const char* what, const std::string& name);
  // A span in whole nanoseconds of trace time.
  void span_ns(int pid, int tid, const std::string& name, const std::string& cat, std::int64_t start_ns,
               std::int64_t end_ns, nlohmann::json args);
  double origin_s_;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace dlb::bench
