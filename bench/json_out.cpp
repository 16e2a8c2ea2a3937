#include "bench/json_out.h"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string_view>

namespace dlb::bench {

namespace {

// Holds back the signals a `timeout` or a terminal sends while one report is
// written; a signal that came in the meantime is delivered when it ends.
class HeldSignals {
 public:
  HeldSignals() {
    sigset_t held;
    sigemptyset(&held);
    for (const int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&held, s);
    pthread_sigmask(SIG_BLOCK, &held, &previous_);
  }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;
  ~HeldSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

 private:
  sigset_t previous_;
};

}  // namespace

IncrementalJsonReporter::IncrementalJsonReporter() {
  inner_.SetOutputStream(&buffer_);
  inner_.SetErrorStream(&buffer_);
  // The closing as this version of Google Benchmark writes it.
  std::ostringstream closing;
  benchmark::JSONReporter probe;
  probe.SetOutputStream(&closing);
  probe.SetErrorStream(&closing);
  probe.Finalize();
  closing_ = closing.str();
}

bool IncrementalJsonReporter::ReportContext(const Context& context) {
  const bool go_on = inner_.ReportContext(context);
  write_new_bytes(false);
  return go_on;
}

void IncrementalJsonReporter::ReportRuns(const std::vector<Run>& runs) {
  inner_.ReportRuns(runs);
  write_new_bytes(false);
}

void IncrementalJsonReporter::Finalize() {
  inner_.Finalize();
  write_new_bytes(true);
}

void IncrementalJsonReporter::write_new_bytes(bool final) {
  std::string bytes = buffer_.str();
  buffer_.str("");
  buffer_.clear();
  const auto reported = static_cast<std::streamoff>(bytes.size());
  if (!final) bytes += closing_;
  std::ostream& out = GetOutputStream();
  const HeldSignals held;
  // Over the previous closing: the file grows by at least what was reported,
  // so no byte of an old closing is left past the new one.
  out.seekp(written_);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  written_ += reported;
}

bool json_out_requested(int argc, const char* const* argv) {
  const auto from_env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : fallback);
  };
  std::string out = from_env("BENCHMARK_OUT", "");
  std::string format = from_env("BENCHMARK_OUT_FORMAT", "json");
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // "--benchmark_out=" is not a prefix of "--benchmark_out_format=".
    for (auto [prefix, value] : {std::pair<std::string_view, std::string*>{"--benchmark_out=", &out},
                                 {"--benchmark_out_format=", &format}})
      if (arg.substr(0, prefix.size()) == prefix) *value = std::string(arg.substr(prefix.size()));
  }
  return !out.empty() && format == "json";
}

}  // namespace dlb::bench
