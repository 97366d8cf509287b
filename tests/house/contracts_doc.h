// Reads a documented list out of docs/CONTRACTS.md, so tests can check that
// the code writes what the document says.
#pragma once

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace dfarm::testing {

// The names in the backquoted spans of docs/CONTRACTS.md between the first
// `after` and the next `before` (after `after`), split at commas, with
// parenthesized remarks dropped and whitespace trimmed, in order. Empty when
// either marker is missing.
inline std::vector<std::string> DocumentedList(const std::string& contracts_path,
                                               const std::string& after,
                                               const std::string& before) {
  std::ifstream in(contracts_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t start = doc.find(after);
  if (start == std::string::npos) return {};
  const size_t end = doc.find(before, start + after.size());
  if (end == std::string::npos) return {};
  const std::string part = doc.substr(start + after.size(), end - start - after.size());
  std::vector<std::string> names;
  const std::regex span("`([^`]*)`");
  for (auto it = std::sregex_iterator(part.begin(), part.end(), span); it != std::sregex_iterator();
       ++it) {
    const std::string inner = std::regex_replace((*it)[1].str(), std::regex("\\([^)]*\\)"), "");
    std::stringstream items(inner);
    std::string item;
    while (std::getline(items, item, ',')) {
      const size_t b = item.find_first_not_of(" \n");
      const size_t e = item.find_last_not_of(" \n");
      if (b != std::string::npos) names.push_back(item.substr(b, e - b + 1));
    }
  }
  return names;
}

}  // namespace dfarm::testing
