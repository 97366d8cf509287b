#!/usr/bin/env python3
"""scripts/check-function-size.py reads C++ as the compiler does where it
matters to brace counting: a digit separator (1'000'000) is not the start of
a character literal, so an apostrophe in a later comment cannot hide the end
of a function; character literals (including L'x' and '{') are still
blanked. Usage: function_size_test.py scripts/check-function-size.py"""
import importlib.util
import os
import sys
import tempfile

spec = importlib.util.spec_from_file_location("check", sys.argv[1])
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

SOURCE = """int First() {
  long x = 1'000'000 + 0xFF'FF;
  wchar_t c = L'x';
  char d = '{';
  return 0;
}
// it's a comment, with an apostrophe
int Second() {
  return 1;
}
"""

failures = []
blanked = check.blank(SOURCE)
if "1'000'000 + 0xFF'FF" not in blanked:
    failures.append("digit separators were blanked: " + repr(blanked.splitlines()[1]))
if "'{'" in blanked or "L'x'" in blanked:
    failures.append("character literals were kept: " + repr(blanked))
with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as f:
    f.write(SOURCE)
try:
    got = list(check.functions(f.name))
finally:
    os.unlink(f.name)
if got != [(1, 6), (8, 3)]:
    failures.append(f"functions (first line, lines) {got}, expected [(1, 6), (8, 3)]")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
