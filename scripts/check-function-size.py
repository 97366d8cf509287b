#!/usr/bin/env python3
"""Fails when a production C++ function body is longer than the limit
(no production function over 120 lines outside generated code and tables).

Reads every tracked .cc/.h file under the code folders except tests
(*_test.cc, *_benchmark.cc, testing/, fuzz/) and the files named in
TABLE_FILES (functions that are tables of cases). Comments, strings and
preprocessor lines are blanked first; a function body is a '{' that follows
a parameter list ')' (with const/override/noexcept/-> type) outside any other
function, so lambdas count toward the function they are in.
Usage: scripts/check-function-size.py [REPO_ROOT] [--limit N] [--list N]
"""
import os
import re
import subprocess
import sys

ROOTS = ["agent", "harness", "reports", "gui", "runtime", "delegates"]
TABLE_FILES = {"delegates/conformance/catalog.cc"}  # the op conformance cases


def blank(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == "'" and re.search(r"(?<![\w.])\d[\w.']*$", src[max(0, i - 64):i]):
            # A digit separator (1'000'000, 0xFF'FF): the token before it
            # starts with a digit; a character literal's prefix (L, u8) does not.
            out.append(c)
            i += 1
            continue
        elif c in "\"'":
            if c == '"' and i > 0 and src[i - 1] == "R":
                m = re.match(r'R"([^(]*)\(', src[i - 1:])
                end = src.find(")" + m.group(1) + '"', i)
                j = n if end < 0 else end + len(m.group(1)) + 2
            else:
                j = i + 1
                while j < n and src[j] != c:
                    j += 2 if src[j] == "\\" else 1
                j += 1
        elif c == "#" and (i == 0 or src[i - 1] == "\n" or src[:i].rstrip(" \t").endswith("\n")):
            j = src.find("\n", i)
            while j > 0 and src[j - 1] == "\\":
                j = src.find("\n", j + 1)
            j = n if j < 0 else j
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", src[i:j]))
        i = j
    return "".join(out)


TAIL = re.compile(r"(\s*(const|override|noexcept|final|mutable|->\s*[\w:<>,\s\*&]+))*\s*$")


def opens_function(before):
    text = TAIL.sub("", re.sub(r"\s+", " ", before)).rstrip()
    if not text.endswith(")"):
        return False
    depth, k = 0, len(text) - 1
    while k >= 0:
        if text[k] == ")":
            depth += 1
        elif text[k] == "(":
            depth -= 1
            if depth == 0:
                break
        k -= 1
    head = text[:k].rstrip()
    word = re.findall(r"[\w:~]+$", head)
    return bool(word) and word[0] not in ("if", "for", "while", "switch", "catch", "return") \
        and not head.endswith("]")


def functions(path):
    src = blank(open(path, encoding="utf-8", errors="replace").read())
    stack, inside = [], 0
    for i, c in enumerate(src):
        if c == "{":
            is_fn = inside == 0 and opens_function(src[max(0, i - 400):i])
            stack.append((i, is_fn))
            inside += is_fn
        elif c == "}" and stack:
            start, is_fn = stack.pop()
            if is_fn:
                inside -= 1
                first = src.count("\n", 0, start) + 1
                yield first, src.count("\n", 0, i) + 1 - first + 1


def main(argv):
    root, limit, show = ".", 120, 0
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--limit":
            limit = int(args.pop(0))
        elif a == "--list":
            show = int(args.pop(0))
        else:
            root = a
    os.chdir(root)
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *ROOTS],
                           capture_output=True, text=True, check=True).stdout.split()
    found = []
    for f in files:
        if not f.endswith((".cc", ".h")) or f.endswith(("_test.cc", "_benchmark.cc")):
            continue
        if "/testing/" in f or "/fuzz/" in f or f in TABLE_FILES or not os.path.isfile(f):
            continue
        for line, size in functions(f):
            if size > min(limit, show or limit):
                found.append((size, f, line))
    found.sort(reverse=True)
    for size, f, line in found:
        print(f"{f}:{line}: function body of {size} lines")
    over = [x for x in found if x[0] > limit]
    if over:
        print(f"check-function-size: {len(over)} function(s) over {limit} lines", file=sys.stderr)
        return 1
    print(f"check-function-size: no production function over {limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
