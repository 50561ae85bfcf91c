// SPDX-License-Identifier: GPL-2.0
// Shared parts of the hzc.ko benchmarks: result collection and table output.
#include "bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace hzc::bench {

namespace {

std::map<std::string, std::vector<double>> &Samples() {
  static std::map<std::string, std::vector<double>> samples;
  return samples;
}

double Median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

double IterationTimer::Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void IterationTimer::Stop() {
  const double elapsed = Now() - start_;
  state_.SetIterationTime(elapsed);
  AddSample(name_, elapsed / ops_);
}

void AddSample(const std::string &name, double seconds) {
  Samples()[name].push_back(seconds);
}

bool Collector::ReportContext(const Context &context) {
  std::cerr << fmt::format("{}: {} CPUs\n", Context::executable_name, context.cpu_info.num_cpus);
  return true;
}

void Collector::ReportRuns(const std::vector<Run> &runs) {
  for (const Run &run : runs) {
    if (run.run_type != Run::RT_Iteration) {
      continue;
    }
    const std::string name = run.run_name.function_name;
    Result &best = results_[name];
    best.ran = true;
    ++best.repetitions;
    if (run.error_occurred) {
      best.error = run.error_message.empty() ? "failed" : run.error_message;
      std::cerr << fmt::format("  {:<44} not measured: {}\n", name, best.error);
      continue;
    }
    if (run.iterations <= 0) {
      continue;
    }
    const double seconds = run.real_accumulated_time / static_cast<double>(run.iterations);
    std::cerr << fmt::format("  {:<44} {:>10} us per iteration (mean), {} iterations\n", name,
                             Micros(seconds), run.iterations);
    for (const auto &[key, counter] : run.counters) {
      best.counters[key] = counter.value;
    }
  }
}

Result Collector::Get(const std::string &name, const std::string &sample) const {
  const auto it = results_.find(name);
  if (it == results_.end()) {
    return Result{};
  }
  Result r = it->second;
  const auto s = Samples().find(sample.empty() ? name : sample);
  if (s == Samples().end() || s->second.empty()) {
    if (r.error.empty()) {
      r.error = "no samples";
    }
    return r;
  }
  r.samples = s->second.size();
  r.seconds = Median(s->second);
  return r;
}

void Table::Print(std::ostream &out) const {
  std::vector<size_t> width(header_.size(), 3);
  for (size_t c = 0; c < header_.size(); ++c) {
    width[c] = std::max(width[c], header_[c].size());
    for (const auto &row : rows_) {
      if (c < row.size()) {
        width[c] = std::max(width[c], row[c].size());
      }
    }
  }
  auto line = [&](const std::vector<std::string> &cells) {
    out << '|';
    for (size_t c = 0; c < header_.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out << ' '
          << (c == 0 ? fmt::format("{:<{}}", cell, width[c])
                     : fmt::format("{:>{}}", cell, width[c]))
          << " |";
    }
    out << '\n';
  };
  line(header_);
  out << '|';
  for (size_t c = 0; c < header_.size(); ++c) {
    out << (c == 0 ? ":" + std::string(width[c] + 1, '-') : std::string(width[c] + 1, '-') + ":")
        << '|';
  }
  out << '\n';
  for (const auto &row : rows_) {
    line(row);
  }
}

std::string Notes::Missing(const std::string &name, const Result &r) {
  if (r.ok()) {
    return "";
  }
  notes_.push_back(fmt::format("`{}`: {}", name, r.ran ? r.error : "not run (filtered out)"));
  return "n/a";
}

void Notes::Print(std::ostream &out) const {
  if (notes_.empty()) {
    return;
  }
  out << '\n';
  for (const auto &note : notes_) {
    out << "- " << note << '\n';
  }
}

bool Init(int argc, char **argv) {
  static std::string defaults[] = {"--benchmark_repetitions=5", "--benchmark_min_time=0.2",
                                   "--benchmark_enable_random_interleaving=true"};
  std::vector<char *> args{argv[0]};
  for (auto &d : defaults) {
    args.push_back(d.data());
  }
  args.insert(args.end(), argv + 1, argv + argc);  // later flags win
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  return !benchmark::ReportUnrecognizedArguments(n, args.data());
}

std::string Size(size_t bytes) {
  if (bytes >= kMiB << 10 && bytes % (kMiB << 10) == 0) {
    return fmt::format("{} GiB", bytes >> 30);
  }
  if (bytes >= kMiB && bytes % kMiB == 0) {
    return fmt::format("{} MiB", bytes >> 20);
  }
  if (bytes >= kKiB && bytes % kKiB == 0) {
    return fmt::format("{} KiB", bytes >> 10);
  }
  return fmt::format("{} B", bytes);
}

namespace {

// Three significant digits, no exponent.
std::string Significant(double v) {
  if (v >= 100) {
    return fmt::format("{:.0f}", v);
  }
  if (v >= 10) {
    return fmt::format("{:.1f}", v);
  }
  if (v >= 1) {
    return fmt::format("{:.2f}", v);
  }
  return fmt::format("{:.3g}", v);
}

}  // namespace

std::string Micros(double seconds) {
  return Significant(seconds * 1e6);
}

std::string GBps(double bytes, double seconds) {
  return seconds > 0 ? Significant(bytes / seconds / 1e9) : "n/a";
}

std::string Ratio(double a, double b) {
  return b > 0 ? Significant(a / b) + "x" : "n/a";
}

size_t MemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) {
      return static_cast<size_t>(kib) * kKiB;
    }
  }
  return 0;
}

}  // namespace hzc::bench
