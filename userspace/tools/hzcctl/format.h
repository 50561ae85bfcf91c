// SPDX-License-Identifier: Apache-2.0
// hzcctl's output: iproute2-style text (one line per object, "key value" pairs; a domain's
// members on indented lines below it) or JSON with the same keys (-j: one line; -p: pretty).
// A list is a JSON array; stat is one object; monitor writes one JSON object per line.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "objects.h"

namespace hzcctl {

// Keys in the order of the text output.
using Json = nlohmann::ordered_json;

enum class Style { kText, kJson, kPretty };

Json ToJson(const Range &r);
Json ToJson(const Activation &a);
Json ToJson(const Domain &d);  // with its members
Json ToJson(const Member &m);
Json ToJson(const Stat &s);
Json ToJson(const Event &e);

// One line each, without the newline (a domain: one line per member follows its own).
std::string ToText(const Range &r);
std::string ToText(const Activation &a);
std::string ToText(const Domain &d);
std::string ToText(const Member &m);
std::string ToText(const Stat &s);
std::string ToText(const Event &e);

// A list in @style, each line ending in a newline ("[]" for an empty JSON list, nothing for
// an empty text list).
template <typename T>
std::string FormatList(const std::vector<T> &items, Style style) {
  std::string out;
  if (style == Style::kText) {
    for (const T &item : items) {
      out += ToText(item);
      out += '\n';
    }
    return out;
  }
  if (style == Style::kPretty) {
    Json array = Json::array();
    for (const T &item : items) {
      array.push_back(ToJson(item));
    }
    return array.dump(2) + '\n';
  }
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += ToJson(items[i]).dump();
  }
  out += "]\n";
  return out;
}

// One object (stat, an event) in @style, ending in a newline.
template <typename T>
std::string FormatOne(const T &item, Style style) {
  switch (style) {
    case Style::kText:
      return ToText(item) + '\n';
    case Style::kJson:
      return ToJson(item).dump() + '\n';
    case Style::kPretty:
      return ToJson(item).dump(2) + '\n';
  }
  return {};
}

// What monitor writes when events were lost: @count events skipped by the seq (count > 0),
// or an overflow of the socket's receive buffer (count 0: how many is known at the next
// event).
std::string FormatLost(uint64_t count, Style style);

}  // namespace hzcctl
