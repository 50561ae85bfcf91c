// SPDX-License-Identifier: GPL-2.0
// Shared parts of the hzc.ko benchmarks (tests/bench/kernel/).
//
// Google Benchmark runs every measurement; a Collector keeps the results so
// that each program can print markdown tables in which a measurement, its
// baseline and their ratio all come from the same run (same guest boot).
// Nothing here judges a timing: the programs report, they do not assert.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace hzc::bench {

inline constexpr size_t kKiB = size_t{1} << 10;
inline constexpr size_t kMiB = size_t{1} << 20;
inline constexpr size_t kHugePage = 2 * kMiB;

// Every benchmark times each iteration itself (IterationTimer); the tables
// report the median of those samples over all repetitions.  On a shared,
// emulated machine the host deschedules the guest's vCPUs now and then; a
// mean over a repetition absorbs such pauses, the median of many short
// samples does not.
class IterationTimer {
 public:
  // `name` keys the samples; `ops` operations per iteration (a sample is the
  // time of one operation).
  IterationTimer(benchmark::State &state, std::string name, int ops = 1)
      : state_(state), name_(std::move(name)), ops_(ops) {}
  void Start() { start_ = Now(); }
  // Ends the iteration: records the sample and gives Google Benchmark the
  // iteration's time (register the benchmark with UseManualTime()).
  void Stop();

  static double Now();

 private:
  benchmark::State &state_;
  std::string name_;
  int ops_;
  double start_ = 0;
};

// Records one sample of `name` (seconds per operation).
void AddSample(const std::string &name, double seconds);

// One benchmark's outcome.
struct Result {
  bool ran = false;   // false: filtered out or not registered
  std::string error;  // SkipWithError() message; empty if it ran to the end
  int repetitions = 0;
  size_t samples = 0;
  double seconds = 0;                      // median time per operation
  std::map<std::string, double> counters;  // of the last repetition

  bool ok() const { return ran && error.empty(); }
};

// Keeps the outcome of every benchmark by its registered name; prints one
// progress line per repetition to stderr (the tables go to stdout).
class Collector final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context &context) override;
  void ReportRuns(const std::vector<Run> &runs) override;
  // The result of benchmark `name`; `sample` names other samples recorded by
  // that benchmark (AddSample), empty for its own.
  Result Get(const std::string &name, const std::string &sample = "") const;

 private:
  std::map<std::string, Result> results_;
};

// A markdown table: the first column left-aligned, the others right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream &out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Collects why cells are empty, printed under a table.
class Notes {
 public:
  // "n/a" for a result that did not run to the end (and notes why), else "".
  std::string Missing(const std::string &name, const Result &r);
  void Add(std::string note) { notes_.push_back(std::move(note)); }
  void Print(std::ostream &out) const;

 private:
  std::vector<std::string> notes_;
};

// Parses argv for Google Benchmark (--benchmark_filter, --benchmark_min_time,
// --benchmark_out, ...) after the defaults of these programs: 5 repetitions
// of at least 0.2 s each, randomly interleaved with the other benchmarks so
// that a measurement and its baseline see the same background load.  False
// (after printing why) on an unknown argument.
bool Init(int argc, char **argv);

// "64 KiB", "2 MiB", "1 GiB".
std::string Size(size_t bytes);
// Microseconds with 3 significant digits.
std::string Micros(double seconds);
// 10^9 bytes per second, with 3 significant digits.
std::string GBps(double bytes, double seconds);
// a / b as "1.23x".
std::string Ratio(double a, double b);

// MemAvailable of /proc/meminfo in bytes, or 0.
size_t MemAvailable();

}  // namespace hzc::bench
