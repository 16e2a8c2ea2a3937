// Where the time of a forward pass goes, for every network backend at batch
// 1, 16 and 64:
//
//   <net>_layer/<backend>/batch:<b>/layer:<i>  layer i's time inside whole
//       passes: every iteration is one instrumented pass (all layers run, in
//       order, on the prepared buffers) and the iteration's time is layer i's
//       share of it. CPU: a steady clock read at every layer boundary. GPU: a
//       CUDA event recorded on the stream before the first layer and after
//       each (no synchronization inside the pass), the stream held until the
//       whole pass is enqueued so that the events bracket the GPU's work and
//       not the host's issuing of it; `host_us` is the host's time to issue
//       the layer (launch and library overhead). Label: the layer's name, op
//       and shape ("stage1.0.conv1 conv+bias+relu 16->16 3x3"); counters
//       flops, bytes_per_second (the layer's input, residual, weights and
//       output, each once: its minimum traffic), share (of the summed layer
//       times of the same passes). A fixed number of passes per repetition
//       (kPasses), since the time Google Benchmark sees is a small part of
//       each pass.
//   <net>_layer/<backend>/batch:<b>/pass  the gap: per iteration one plain
//       pass as a user calls it (run, then wait for the result; its time is
//       the iteration's), then one instrumented pass. Counters (medians over
//       the iterations): pass_us, layers_us (the summed layer times),
//       gap_us = pass_us - layers_us (dispatch, launch, synchronization and
//       framework overhead: what makes batch 1 slow) and gap_frac.
//
// gpu_cudnn_graph has no layers (its pass is one graph launch; its layer
// calls are gpu_cudnn's, issued one by one): only its pass case, whose gap is
// the graph against the same layers run eagerly.
//
// --trace=FILE.json: the network or layer case the filter selects (the first
// one, if several) also writes a Chrome trace-event file (Perfetto,
// chrome://tracing; the format in trace.h): the construction (prepare) and
// first pass as one process, kTracePasses steady passes as another, and on
// a GPU the pass as the benchmark times it (run()) as a third; tracks: the
// host thread (layers on the CPU, their issuing on the GPU), the GPU stream
// (the device's own timeline: each layer from its start event to the next
// layer's, CUDA events recorded between the layer calls), the input copy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cases/nn/infer/nn_case.h"
#include "bench/harness.h"
#include "bench/nn/infer/nn_layers.h"
#include "kernels/common/error.h"
#if DLB_HAVE_CUDA
#include "kernels/common/cuda_resources.h"
#endif

namespace dlb::bench {
namespace {

constexpr std::int64_t kLayerBatches[] = {1, 16, 64};
constexpr int kTracePasses = 5;

// Instrumented passes per repetition of a layer case, by batch: 0.03 to 0.4 s
// of resnet20 passes on 2 cores, so that all layer cases of the default
// suite take about 3 minutes there with 5 repetitions.
int passes_for(std::int64_t batch) { return batch == 1 ? 100 : batch <= 16 ? 30 : 10; }

double now_s() { return steady_seconds(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return percentile(v, 0.5);
}

double layer_bytes(const nn::Layer& l, std::int64_t batch) {
  const double activations =
      static_cast<double>(batch) * static_cast<double>(l.in_size() + l.out_size() * (l.residual >= 0 ? 2 : 1));
  return 4.0 * (activations + static_cast<double>(l.weight.size() + l.bias.size()));
}

// The case the layer cases of one (network, backend, batch) share, set up
// and validated once (against PyTorch's logits, as the network case is).
NetCase* shared_case(benchmark::State& state, const nn::NetVariant& variant, std::string_view network,
                     std::int64_t batch) {
  static std::string key;
  static std::unique_ptr<NetCase> c;
  static ref::Comparison comparison;
  const std::string k = std::string(network) + "/" + std::string(variant.name) + "/" + std::to_string(batch);
  if (k != key) {
    c.reset();
    key.clear();
    c = std::make_unique<NetCase>(variant, network, batch);
    comparison = c->validate();
    key = k;
  }
  if (!check(state, comparison)) return nullptr;
  return c.get();
}

std::string& trace_path() {
  static std::string path;
  return path;
}

bool& trace_written() {
  static bool written = false;
  return written;
}

DLB_BENCH_FLAG(trace, "trace", "FILE.json", "--trace=resnet20.json",
               "a Chrome trace (Perfetto, chrome://tracing) of the first network case the filter selects: "
               "prepare and the first pass, then 5 passes, layer by layer");

void register_layers(Config& config) {
  trace_path() = take_flag(config, "trace");
  if (tracing()) {
    if (!std::ofstream(trace_path())) throw Error("--trace: cannot write " + trace_path());
    config.at_end.push_back([] {
      if (trace_written()) return 0;
      std::remove(trace_path().c_str());  // the empty file the check above created
      std::fprintf(stderr,
                   "bench: --trace=%s: no network case ran, so no trace was written (select one with "
                   "--benchmark_filter, e.g. '^resnet20/cpu_onednn/batch:16/')\n",
                   trace_path().c_str());
      return 2;
    });
  }
  for (const std::string_view network : nn::network_names()) {
    const nn::Network* net = nullptr;
    try {
      net = &nn::network(network);
    } catch (const std::exception& e) {
      // The layers are not known without the files: each backend's pass
      // case says why, and bench exits 2.
      const std::string why = std::string(network) + ": " + e.what();
      for (const nn::NetVariant* variant : variants_to_run(nn::network_variants(), config))
        for (const std::int64_t batch : kLayerBatches)
          add_case(case_name(std::string(network) + "_layer", variant->name, {{"batch", batch}}) + "/pass",
                   variant->device, [why](benchmark::State& state) { report_input_error(state, why); },
                   CaseOptions{.manual_time = true});
      continue;
    }
    for (const nn::NetVariant* variant : variants_to_run(nn::network_variants(), config)) {
      if (!variant->accepts_problem(nn::NetArgs{net})) continue;
      const bool has_layers = !variant->name.ends_with("_graph");
      for (const std::int64_t batch : kLayerBatches) {
        const std::string prefix = std::string(network) + "_layer";
        add_case(
            case_name(prefix, variant->name, {{"batch", batch}}) + "/pass", variant->device,
            [variant, network, batch](benchmark::State& state) {
              auto* c = shared_case(state, *variant, network, batch);
              if (c == nullptr) return;
              write_trace(*variant, network, batch, detail::current_case_name());
              LayerTimer timer(*c);
              c->run();  // warm-up
              c->context().synchronize();
              timer.pass();
              std::vector<double> pass, layers, host;
              const MachineWatch watch;
              for (auto _ : state) {
                const double start = now_s();
                c->run();
                c->context().synchronize();
                pass.push_back(now_s() - start);
                state.SetIterationTime(pass.back());
                const PassTimes t = timer.pass();
                layers.push_back(std::accumulate(t.layer_s.begin(), t.layer_s.end(), 0.0));
                host.push_back(std::accumulate(t.host_s.begin(), t.host_s.end(), 0.0));
              }
              if (variant->device == Device::cpu) watch.record(state);
              if (pass.empty()) return;
              const double pass_us = median(pass) * 1e6, layers_us = median(layers) * 1e6;
              state.counters["pass_us"] = pass_us;
              state.counters["layers_us"] = layers_us;
              state.counters["gap_us"] = pass_us - layers_us;
              state.counters["gap_frac"] = (pass_us - layers_us) / pass_us;
              if (variant->device == Device::gpu) state.counters["host_us"] = median(host) * 1e6;
              state.SetItemsProcessed(state.iterations() * batch);
              set_flops(state, 2.0 * c->network().macs() * static_cast<double>(batch));
              state.SetLabel(c->report().implementation);
            },
            CaseOptions{.manual_time = true});
        if (!has_layers) continue;
        for (std::size_t i = 0; i < net->layers.size(); ++i) {
          add_case(
              case_name(prefix, variant->name, {{"batch", batch}, {"layer", static_cast<long long>(i)}}),
              variant->device,
              [variant, network, batch, i](benchmark::State& state) {
                auto* c = shared_case(state, *variant, network, batch);
                if (c == nullptr) return;
                write_trace(*variant, network, batch, detail::current_case_name());
                LayerTimer timer(*c);
                timer.pass();  // warm-up
                double share = 0, host = 0;
                const MachineWatch watch;
                for (auto _ : state) {
                  const PassTimes t = timer.pass();
                  state.SetIterationTime(t.layer_s[i]);
                  share += t.layer_s[i] / std::accumulate(t.layer_s.begin(), t.layer_s.end(), 0.0);
                  host += t.host_s[i];
                }
                if (variant->device == Device::cpu) watch.record(state);
                const auto n = static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
                state.counters["share"] = share / n;
                if (variant->device == Device::gpu) state.counters["host_us"] = host / n * 1e6;
                const nn::Layer& layer = c->network().layers[i];
                set_flops(state, 2.0 * layer.macs() * static_cast<double>(batch));
                set_bytes(state, layer_bytes(layer, batch));
                state.SetLabel(layer.label());
              },
              CaseOptions{.manual_time = true, .iterations = passes_for(batch)});
        }
      }
    }
  }
}

DLB_BENCH_FAMILY(register_layers,
                 "where a forward pass's time goes: each layer's time inside whole passes, and the gap between the "
                 "layers and a plain pass");

}  // namespace

LayerTimer::LayerTimer(const NetCase& c) : c_(c) {
  DLB_REQUIRE(c.report().layer_calls.size() == c.network().layers.size(),
              "the backend reports " + std::to_string(c.report().layer_calls.size()) + " layer calls for " +
                  std::to_string(c.network().layers.size()) + " layers");
#if DLB_HAVE_CUDA
  if (c.context().exec().stream != nullptr) events_ = std::vector<Event>(c.network().layers.size() + 1);
#endif
}

PassTimes LayerTimer::pass() {
  const auto& calls = c_.report().layer_calls;
  const std::size_t n = calls.size();
  PassTimes t;
  t.layer_s.resize(n);
  t.host_s.resize(n);
  t.start_s.resize(n);
  t.host_start_s.resize(n);
#if DLB_HAVE_CUDA
  if (!events_.empty()) {
    const auto stream = c_.context().exec().stream;
    // A pass that waits for its stream itself would wait for the hold.
    const bool hold = !c_.report().synchronizes;
    std::optional<StreamHold> held;  // released on every path, a throwing layer call included
    if (hold) held.emplace(stream);
    t.begin_s = now_s();
    events_[0].record(stream);
    for (std::size_t i = 0; i < n; ++i) {
      t.host_start_s[i] = now_s() - t.begin_s;
      calls[i]();
      events_[i + 1].record(stream);
      t.host_s[i] = now_s() - t.begin_s - t.host_start_s[i];
    }
    // The GPU starts when the hold is released: its timeline's origin.
    t.device_origin_s = now_s() - t.begin_s;
    if (held) held->release();
    events_[n].synchronize();
    c_.context().synchronize();
    if (held && held->timed_out()) throw Error("the layer timer's hold timed out: issuing one pass took over a second");
    if (!hold) t.device_origin_s = 0;
    for (std::size_t i = 0; i < n; ++i) {
      t.start_s[i] = static_cast<double>(events_[i].elapsed_ms_since(events_[0])) * 1e-3;
      t.layer_s[i] = static_cast<double>(events_[i + 1].elapsed_ms_since(events_[i])) * 1e-3;
    }
    t.device_end_s = static_cast<double>(events_[n].elapsed_ms_since(events_[0])) * 1e-3;
    return t;
  }
#endif
  t.begin_s = now_s();
  double last = t.begin_s;
  for (std::size_t i = 0; i < n; ++i) {
    calls[i]();
    const double end = now_s();
    t.start_s[i] = t.host_start_s[i] = last - t.begin_s;
    t.layer_s[i] = t.host_s[i] = end - last;
    last = end;
  }
  return t;
}

bool tracing() { return !trace_path().empty(); }

namespace {

#if DLB_HAVE_CUDA
// The pass as the benchmark times it, run() (for the graph rows one CUDA
// graph launch, where the layer timer issues the layer calls one by one),
// between two events on the stream, held until the pass is enqueued as the
// layer timer holds it: one "layer", the whole pass.
PassTimes timed_pass(NetCase& c) {
  const auto stream = c.context().exec().stream;
  const Event start, stop;
  PassTimes t;
  const bool hold = !c.report().synchronizes;
  std::optional<StreamHold> held;
  if (hold) held.emplace(stream);
  t.begin_s = now_s();
  start.record(stream);
  c.run();
  stop.record(stream);
  t.host_start_s = {0.0};
  t.host_s = {now_s() - t.begin_s};
  t.device_origin_s = hold ? t.host_s[0] : 0.0;
  if (held) held->release();
  stop.synchronize();
  c.context().synchronize();
  if (held && held->timed_out()) throw Error("the trace's hold timed out: issuing one pass took over a second");
  t.start_s = {0.0};
  t.layer_s = {static_cast<double>(stop.elapsed_ms_since(start)) * 1e-3};
  t.device_end_s = t.layer_s[0];
  return t;
}
#endif

}  // namespace

void drop_trace() {
  if (!tracing() || trace_written()) return;
  std::remove(trace_path().c_str());
  trace_path().clear();
}

bool writes_trace(std::string_view case_name) {
  for (const std::string_view network : nn::network_names())
    if (case_name.starts_with(std::string(network) + "/") || case_name.starts_with(std::string(network) + "_layer/"))
      return true;
  return false;
}

void write_trace(const nn::NetVariant& variant, std::string_view network, std::int64_t batch,
                 const std::string& case_name) {
  if (trace_written() || !tracing()) return;
  trace_written() = true;
  const bool gpu = variant.device == Device::gpu;
  const double origin = now_s();
  TraceWriter trace(origin);
  trace.process(1, "first pass: prepare (primitive creation, algorithm search, tuning trials), cold pass", gpu);
  trace.process(2, "steady passes", gpu);
  if (gpu) trace.process(3, "the pass as the benchmark times it (run(): for the graph rows one CUDA graph launch)", gpu);
  PassTimes first;
  NetCase c(variant, network, batch, [&](NetCase& fresh) { first = LayerTimer(fresh).pass(); });
  const auto [prepare_start, prepare_end] = c.prepare_span();
  trace.span(1, TraceWriter::kHost, "prepare", "prepare", prepare_start, prepare_end - prepare_start);
  std::vector<TraceLayer> layers;
  for (const nn::Layer& l : c.network().layers) layers.push_back({l.name, l.label(), l.op()});
  trace.pass(1, layers, first, 0, gpu);
  LayerTimer timer(c);
  for (int p = 1; p <= kTracePasses; ++p) {
    const double copy_start = now_s();
    c.reload_input();  // the input, as a loader hands it over (synchronous copy on the GPU)
    if (gpu) trace.span(2, TraceWriter::kCopy, "input h2d", "copy", copy_start, now_s() - copy_start);
    trace.pass(2, layers, timer.pass(), p, gpu);
  }
#if DLB_HAVE_CUDA
  if (gpu) {
    c.reload_input();
    const PassTimes t = timed_pass(c);
    const nlohmann::json args = {{"implementation", c.report().implementation}};
    trace.span(3, TraceWriter::kHost, "run()", "launch", t.begin_s, t.host_s[0], args);
    trace.span(3, TraceWriter::kStream, "pass (as timed)", "timed pass", t.begin_s + t.device_origin_s,
               t.layer_s[0], args);
  }
#endif
  trace.write(trace_path(), {{"case", case_name},
                             {"implementation", c.report().implementation},
                             {"batch", batch},
                             {"passes", kTracePasses}});
  std::fprintf(stderr, "bench: trace of %s (first pass and %d more) written to %s\n", case_name.c_str(),
               kTracePasses, trace_path().c_str());
}

}  // namespace dlb::bench
