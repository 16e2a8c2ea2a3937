#include "bench/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <fstream>

#include "kernels/common/error.h"

namespace dlb::bench {

void TraceWriter::process(int pid, const std::string& name, bool gpu) {
  meta(pid, 0, "process_name", name);
  meta(pid, kHost, "thread_name", gpu ? "host thread (issuing)" : "host thread");
  if (gpu) {
    meta(pid, kStream, "thread_name", "GPU stream");
    meta(pid, kCopy, "thread_name", "copies");
  }
}

namespace {

// Trace time in whole nanoseconds: Perfetto reads the microsecond
// timestamps into integer nanoseconds, so spans that end where the next
// begins must do so in nanoseconds, or it sees them overlap.
std::int64_t to_ns(double s) { return std::llround(s * 1e9); }
double to_us(std::int64_t ns) { return static_cast<double>(ns) * 1e-3; }

}  // namespace

void TraceWriter::span(int pid, int tid, const std::string& name, const std::string& cat, double start_s,
                       double dur_s, nlohmann::json args) {
  const std::int64_t start = to_ns(start_s - origin_s_);
  span_ns(pid, tid, name, cat, start, start + std::max<std::int64_t>(to_ns(dur_s), 0), std::move(args));
}

void TraceWriter::span_ns(int pid, int tid, const std::string& name, const std::string& cat, std::int64_t start_ns,
                          std::int64_t end_ns, nlohmann::json args) {
  events_.push_back({{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", to_us(start_ns)},
                     {"dur", to_us(std::max(end_ns - start_ns, std::int64_t{0}))}, {"args", std::move(args)}});
}

void TraceWriter::pass(int pid, const std::vector<TraceLayer>& layers, const PassTimes& t, int index, bool gpu) {
  const std::size_t n = t.layer_s.size();
  DLB_REQUIRE(layers.size() >= n && t.start_s.size() == n && t.host_s.size() == n && t.host_start_s.size() == n,
              "trace: a pass of " + std::to_string(n) + " layers with times missing");
  // GPU: the layers' boundaries on the stream, each the offset of its event
  // from the pass's first one (start_s, then device_end_s): layer i runs
  // from boundary i to boundary i + 1, so the spans meet end to end exactly.
  // Each layer's own elapsed time (layer_s, between its two events) is
  // rounded apart from these, and adding them up would make spans overlap
  // or leave gaps the events never measured.
  std::vector<std::int64_t> boundary;
  if (gpu) {
    const double device_start = t.begin_s + t.device_origin_s - origin_s_;
    for (std::size_t i = 0; i < n; ++i) boundary.push_back(to_ns(device_start + t.start_s[i]));
    const double last_end = t.device_end_s > 0 || n == 0 ? t.device_end_s : t.start_s[n - 1] + t.layer_s[n - 1];
    boundary.push_back(to_ns(device_start + last_end));
    for (std::size_t i = 1; i < boundary.size(); ++i) boundary[i] = std::max(boundary[i], boundary[i - 1]);
  }
  std::int64_t end = to_ns(t.begin_s - origin_s_);
  for (std::size_t i = 0; i < n; ++i) {
    const TraceLayer& l = layers[i];
    nlohmann::json args = {{"label", l.label}, {"op", l.op}, {"layer", i}, {"pass", index}};
    span(pid, kHost, l.name, gpu ? "launch" : "layer", t.begin_s + t.host_start_s[i], t.host_s[i], args);
    if (gpu) {
      args["device_us"] = t.layer_s[i] * 1e6;  // between the layer's own two events
      span_ns(pid, kStream, l.name, "layer", boundary[i], boundary[i + 1], args);
      end = std::max(end, boundary[i + 1]);
    } else {
      end = std::max(end, to_ns(t.begin_s + t.host_start_s[i] - origin_s_) + to_ns(t.host_s[i]));
    }
  }
  span_ns(pid, kHost, "pass " + std::to_string(index), "pass", to_ns(t.begin_s - origin_s_), end, {{"pass", index}});
}

nlohmann::json TraceWriter::json(const nlohmann::json& other) const {
  return {{"traceEvents", events_}, {"displayTimeUnit", "ms"}, {"otherData", other}};
}

void TraceWriter::write(const std::string& path, const nlohmann::json& other) const {
  std::ofstream out(path);
  out << json(other).dump(1) << "\n";
  if (!out) throw Error("--trace: cannot write " + path);
}

void TraceWriter::meta(int pid, int tid, const char* what, const std::string& name) {
  events_.push_back({{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
}

}  // namespace dlb::bench
