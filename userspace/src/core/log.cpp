// SPDX-License-Identifier: Apache-2.0
#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <memory>

#include "core/config.h"

namespace hzc {

namespace {

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kDebug:
      return spdlog::level::debug;
  }
  return spdlog::level::warn;
}

std::unique_ptr<spdlog::logger> MakeLogger() {
  const Config &config = GetConfig();
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_unique<spdlog::logger>("hzc", std::move(sink));
  logger->set_pattern("hzc[%P]: %l: %v");
  logger->set_level(ToSpdlog(config.log_level));
  logger->flush_on(spdlog::level::trace);
  for (const auto &warning : config.warnings) {
    logger->warn("config: {}", warning);
  }
  for (const auto &line : config.Describe()) {
    logger->info("config: {}", line);
  }
  return logger;
}

}  // namespace

spdlog::logger &Log() {
  // Never destroyed: the library may log from other static destructors at exit.
  static spdlog::logger *const logger = MakeLogger().release();
  return *logger;
}

}  // namespace hzc
