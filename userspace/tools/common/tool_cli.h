// SPDX-License-Identifier: Apache-2.0
// Command lines of the hzc tools (hzc-info, hzc-demo, hzc-perf, hzcctl), parsed by CLI11 the way
// command-line tools behave: --help prints the usage on stdout and exits 0, --version prints
// "NAME VERSION" on stdout and exits 0, and a usage error prints one line on stderr and exits 2
// (never CLI11's own exit codes).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#ifndef HZC_PACKAGE_VERSION
#error "HZC_PACKAGE_VERSION must be defined (the tool's CMakeLists.txt)"
#endif

namespace hzc::tool {

constexpr int kUsageError = 2;

// A CLI11 app with --help and --version.
inline void AddStandardFlags(CLI::App &app) {
  app.set_help_flag("-h,--help", "print this help and exit");
  app.set_version_flag("--version", app.get_name() + " " + HZC_PACKAGE_VERSION,
                       "print the version and exit");
}

// Parse @argv into @app: nullopt to go on, or the exit status of the tool.
inline std::optional<int> Parse(CLI::App &app, int argc, char **argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp &) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion &e) {
    std::printf("%s\n", e.what());
    return 0;
  } catch (const CLI::ParseError &e) {
    std::string message = e.what();
    for (char &c : message) {
      c = c == '\n' ? ' ' : c;
    }
    std::fprintf(stderr, "%s: %s (see %s --help)\n", app.get_name().c_str(), message.c_str(),
                 app.get_name().c_str());
    return kUsageError;
  }
  return std::nullopt;
}

}  // namespace hzc::tool
