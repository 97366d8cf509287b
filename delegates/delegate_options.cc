#include "delegates/delegate_options.h"

namespace dfarm::delegates {
namespace {

// Calls fn(entry) for each non-empty ';'-separated entry of text.
template <typename Fn>
void ForEachEntry(std::string_view text, Fn&& fn) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view entry = text.substr(start, end - start);
    start = end + 1;
    if (!entry.empty()) fn(entry);
  }
}

bool HasControl(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

}  // namespace

std::optional<DelegateOptions> ParseDelegateOptions(std::string_view text, std::string_view what,
                                                    std::string* error) {
  DelegateOptions options;
  bool ok = true;
  ForEachEntry(text, [&](std::string_view entry) {
    if (!ok) return;
    size_t colon = entry.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      if (error) {
        *error = "bad " + std::string(what) + " entry '" + std::string(entry) +
                 "' (expected 'key:value')";
      }
      ok = false;
      return;
    }
    options.emplace_back(std::string(entry.substr(0, colon)), std::string(entry.substr(colon + 1)));
  });
  if (!ok) return std::nullopt;
  return options;
}

std::string FormatDelegateOptions(const DelegateOptions& options) {
  std::string text;
  for (const auto& [key, value] : options) {
    if (!text.empty()) text += ';';
    text += key;
    text += ':';
    text += value;
  }
  return text;
}

bool IsWritableOption(std::string_view key, std::string_view value) {
  return !key.empty() && key.find_first_of(":;") == std::string_view::npos &&
         value.find(';') == std::string_view::npos && !HasControl(key) && !HasControl(value);
}

std::vector<std::string> DelegateOptionKeys(std::string_view text) {
  std::vector<std::string> keys;
  ForEachEntry(
      text, [&](std::string_view entry) { keys.emplace_back(entry.substr(0, entry.find(':'))); });
  return keys;
}

}  // namespace dfarm::delegates
