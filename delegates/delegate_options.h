// The one delegate-option syntax: "k1:v1;k2:v2". An entry's key ends at its
// first ':' (a value may hold ':', never ';' or a control character); empty
// entries are skipped. The runner's --delegate-options, the agent's
// JobSpec.delegate_options, the store's jobs.delegate_options and
// dfarm-conformance's NAME:OPTIONS are all written and read here
// (docs/CONTRACTS.md). Header and source depend on nothing but the standard
// library, so the harness and the agent use it without the delegates.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dfarm::delegates {

// Options in the order given; a key may repeat (the delegate decides).
using DelegateOptions = std::vector<std::pair<std::string, std::string>>;

// Parses "k1:v1;k2:v2". On a bad entry returns nothing and sets *error to
// "bad WHAT entry 'ENTRY' (expected 'key:value')" (WHAT names the input, e.g.
// "--delegate-options").
std::optional<DelegateOptions> ParseDelegateOptions(std::string_view text, std::string_view what,
                                                    std::string* error);

// "k1:v1;k2:v2" in the order given.
std::string FormatDelegateOptions(const DelegateOptions& options);

// True when `key` and `value` can be written in this syntax: a key of at
// least one character without ':' or ';', a value without ';', neither with
// a control character.
bool IsWritableOption(std::string_view key, std::string_view value);

// The keys of `text`'s entries, read as the runner splits them (an entry
// without ':' is all key), for checks that must not trust the text.
std::vector<std::string> DelegateOptionKeys(std::string_view text);

}  // namespace dfarm::delegates
