// Text from a device made safe to print on a terminal. Everything an agent
// sends (device info, job errors, state notes, stderr tails, progress phases)
// is the agent's to choose: the store keeps it as it arrived, and whatever
// dfarm prints of it goes through TerminalSafe at print time, so that no
// escape sequence reaches the terminal, it stays on one line, and a 100 KB
// field does not flood the screen.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dfarm::harness {

// How long a printed agent string may be by default (bytes, after escaping).
inline constexpr size_t kTerminalFieldBytes = 512;

// `text` on one line and at most `max_bytes` long (at least 16):
//  - control characters (below 0x20, and 0x7f) print as "\x1b", "\x0a", ...;
//  - valid UTF-8 stays as it is, except the C1 controls U+0080..U+009F and
//    the bidirectional overrides and isolates (U+202A..U+202E,
//    U+2066..U+2069), which print as "\u009b", "\u202e";
//  - a byte that is not part of valid UTF-8 prints as "\xff";
//  - longer text is cut at a whole character or escape and ends in
//    "...(N bytes)", N the length of `text`.
std::string TerminalSafe(std::string_view text, size_t max_bytes = kTerminalFieldBytes);

}  // namespace dfarm::harness
