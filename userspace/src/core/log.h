// SPDX-License-Identifier: Apache-2.0
// Logging: one line per event on stderr, "hzc[PID]: LEVEL: message", level from HZC_LOG.
// Messages are lowercase and name the API, the argument and the cause; the function that
// first sees an error reports it (through a Status) and callers only propagate.
#pragma once

#include <spdlog/logger.h>

#include <utility>

namespace hzc {

// The library's own logger (not registered with spdlog, so it never clashes with an
// application's). Created on first use with the level of GetConfig().
spdlog::logger &Log();

template <typename... Args>
void LogError(fmt::format_string<Args...> format, Args &&...args) {
  Log().error(format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogWarn(fmt::format_string<Args...> format, Args &&...args) {
  Log().warn(format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogInfo(fmt::format_string<Args...> format, Args &&...args) {
  Log().info(format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogDebug(fmt::format_string<Args...> format, Args &&...args) {
  Log().debug(format, std::forward<Args>(args)...);
}

}  // namespace hzc
