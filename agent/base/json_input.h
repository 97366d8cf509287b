// Limits on the JSON documents users and runners hand the host (a sweep spec,
// a gate policy, a runner's report, a stored spec read back): nesting is
// bounded before a document is parsed, so a deep one is a clean error, never
// a stack overflow in a recursive reader or writer; and a value quoted in a
// message is cut short, so an error stays one readable line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "agent/base/result.h"

namespace dfarm {

// The deepest nesting of arrays and objects a document may have. Real specs,
// policies and runner reports nest fewer than 10 levels.
inline constexpr int kMaxJsonDepth = 64;

// Fails (kInvalidInput) with "WHAT: nested deeper than 64 levels" when
// `text` opens more than `max_depth` arrays or objects inside one another;
// `what` names the document as the caller's other messages do ("policy
// 'gate.json'", "runner JSON").
// A scan of the bytes, strings skipped; says nothing about whether the text
// is valid JSON (the parser that follows does).
Result<void> CheckJsonNesting(std::string_view text, std::string_view what,
                              int max_depth = kMaxJsonDepth);

// `text` for a message: whole when at most `max_chars` bytes, else its first
// `max_chars` bytes (cut at a UTF-8 character boundary) and "…".
inline constexpr size_t kMaxQuotedChars = 80;
std::string Abbreviated(std::string_view text, size_t max_chars = kMaxQuotedChars);

}  // namespace dfarm
