#!/usr/bin/env python3
"""The layer diagram in README.md ("### Layers") says what scripts/check-layers.sh
enforces: for every layer, the folders and headers the diagram lists (plus the layer
itself) are exactly those the script's ALLOWED table lets it include. An entry already
covered by another entry of the same row (reports/store/ under reports/) is redundant and
ignored. Prints each difference and exits 1 when there is one.
Usage: layer_diagram_test.py README.md scripts/check-layers.sh"""
import re
import sys


def norm(entry):
    entry = entry.strip().rstrip(",")
    return entry if entry.endswith((".h", "/")) else entry + "/"


def reduce(entries):
    """Drops entries another entry of the set covers (a folder prefix)."""
    return {e for e in entries if not any(o != e and o.endswith("/") and e.startswith(o)
                                          for o in entries)}


def diagram(readme_text):
    section = readme_text.split("### Layers", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    rows, current = {}, None
    for line in block.splitlines():
        head = re.match(r"^(\S+/)\s", line)
        if head:
            current = head.group(1)
            rows[current] = set()
            rest = line.split("->", 1)[1] if "->" in line else ""
        elif current and line.strip():
            rest = line
        else:
            continue
        if "nothing of ours" in rest:
            continue
        rows[current] |= {norm(e) for e in rest.split(",") if e.strip()}
    return rows


def allowed(script_text):
    table = re.search(r"declare -A ALLOWED=\((.*?)\n\)", script_text, re.S).group(1)
    return {m.group(1): set(m.group(2).split())
            for m in re.finditer(r'\[([^\]]+)\]="([^"]*)"', table)}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        drawn = diagram(f.read())
    with open(sys.argv[2], encoding="utf-8") as f:
        enforced = allowed(f.read())
    problems = []
    for layer in sorted(set(drawn) | set(enforced)):
        if layer not in drawn:
            problems.append(f"{layer}: in check-layers.sh, missing from the README's diagram")
            continue
        if layer not in enforced:
            problems.append(f"{layer}: in the README's diagram, not in check-layers.sh")
            continue
        want = reduce(enforced[layer])
        have = reduce(drawn[layer] | {layer})
        for e in sorted(want - have):
            problems.append(f"{layer}: may include {e} (check-layers.sh) but the diagram omits it")
        for e in sorted(have - want):
            problems.append(f"{layer}: the diagram lists {e} but check-layers.sh forbids it")
    for p in problems:
        print("layer diagram:", p)
    if problems:
        return 1
    print(f"layer diagram: {len(drawn)} layers, as check-layers.sh enforces them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
