#include "harness/run/terminal_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace dfarm::harness {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` and its code
// point, or 0 when it does not start with one (overlong forms, surrogates
// and values over U+10FFFF are not valid).
size_t DecodeUtf8(std::string_view s, uint32_t* cp) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = b(0);
  size_t n;
  uint32_t v;
  uint32_t min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xe0) == 0xc0) {
    n = 2, v = c & 0x1f, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, v = c & 0x0f, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(i) & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

bool IsHiddenCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// The printable form of the character at the start of `s`; *used gets how
// many bytes of `s` it stands for.
std::string SafeUnit(std::string_view s, size_t* used) {
  char buf[16];
  uint32_t cp = 0;
  size_t n = DecodeUtf8(s, &cp);
  if (n == 0) {
    *used = 1;
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[0]));
    return buf;
  }
  *used = n;
  if (cp < 0x20 || cp == 0x7f) {
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
    return buf;
  }
  if (IsHiddenCodePoint(cp)) {
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
    return buf;
  }
  return std::string(s.substr(0, n));
}

}  // namespace

std::string TerminalSafe(std::string_view text, size_t max_bytes) {
  max_bytes = std::max<size_t>(max_bytes, 16);
  std::string cut_mark = "...(" + std::to_string(text.size()) + " bytes)";
  if (cut_mark.size() > max_bytes / 2) cut_mark = "...";
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t kept = 0;  // `out` up to the last unit that leaves room for cut_mark
  for (size_t i = 0; i < text.size();) {
    size_t used = 0;
    std::string unit = SafeUnit(text.substr(i), &used);
    if (out.size() + unit.size() > max_bytes) {
      out.resize(kept);
      return out + cut_mark;
    }
    out += unit;
    if (out.size() + cut_mark.size() <= max_bytes) kept = out.size();
    i += used;
  }
  return out;
}

}  // namespace dfarm::harness
