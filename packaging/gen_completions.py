#!/usr/bin/env python3
"""Writes dfarm's shell completions and its man page's subcommand section
from `dfarm [SUB...] --help`, so that they never drift from the program.

usage: gen_completions.py DFARM OUTDIR
  OUTDIR/completions/dfarm    bash (bash-completion's completions/ folder)
  OUTDIR/completions/_dfarm   zsh (a vendor-completions folder on fpath)
  OUTDIR/man/dfarm.h2m        help2man --include: [SUBCOMMANDS] and [SEE ALSO]
CMake runs it after each build of dfarm (cmake/DfarmInstall.cmake).
"""
import os
import re
import subprocess
import sys

OPTION = re.compile(r"^\s{2}(-\w,)?(--[A-Za-z0-9][A-Za-z0-9-]*)")
SUBCOMMAND = re.compile(r"^\s{2}([a-z][a-z0-9-]*)\s{2,}(.*)$")


def run_help(dfarm, path):
    done = subprocess.run([dfarm, *path, "--help"], capture_output=True, text=True, check=True)
    return done.stdout


def parse(text):
    """The options and (name, description) subcommands of one --help text."""
    options, subs, section = [], [], ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section = line[:-1]
            continue
        if section == "Options":
            m = OPTION.match(line)
            if m:
                if m.group(1):
                    options.append(m.group(1)[:-1])
                options.append(m.group(2))
        elif section == "Subcommands":
            m = SUBCOMMAND.match(line)
            if m:
                subs.append((m.group(1), m.group(2).strip()))
    return options, subs


def walk(dfarm):
    """{"/sweep": (help, options, subs), ...}, "" for dfarm itself, depth first."""
    tree, todo = {}, [[]]
    while todo:
        path = todo.pop(0)
        text = run_help(dfarm, path)
        options, subs = parse(text)
        tree["".join("/" + p for p in path)] = (text, options, subs)
        todo.extend(path + [name] for name, _ in subs)
    return tree


def bash(tree):
    known = "|".join(k for k in tree if k)
    lines = [
        "# bash completion for dfarm: generated from dfarm's --help by",
        "# packaging/gen_completions.py (do not edit). Works with or without",
        "# the bash-completion package (whose _filedir it uses for files when there).",
        "_dfarm() {",
        "  local cur=${COMP_WORDS[COMP_CWORD]}",
        '  local cmdpath="" i w subs="" opts=""',
        "  for ((i = 1; i < COMP_CWORD; i++)); do",
        "    w=${COMP_WORDS[i]}",
        "    [[ $w == -* ]] && continue",
        '    case "$cmdpath/$w" in',
        f'      {known}) cmdpath="$cmdpath/$w" ;;',
        "    esac",
        "  done",
        '  case "$cmdpath" in',
    ]
    for key, (_, options, subs) in tree.items():
        pattern = key if key else '""'
        lines.append(f'    {pattern}) subs="{" ".join(n for n, _ in subs)}"; '
                     f'opts="{" ".join(options)}" ;;')
    lines += [
        "  esac",
        "  if [[ $cur == -* ]]; then",
        '    mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")',
        "  elif [[ -n $subs ]]; then",
        '    mapfile -t COMPREPLY < <(compgen -W "$subs" -- "$cur")',
        "  elif declare -F _filedir >/dev/null; then",
        "    _filedir",
        "  else",
        '    mapfile -t COMPREPLY < <(compgen -f -- "$cur")',
        "  fi",
        "}",
        "complete -F _dfarm dfarm",
        "",
    ]
    return "\n".join(lines)


def zsh_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def zsh(tree):
    known = "|".join(k for k in tree if k)
    lines = [
        "#compdef dfarm",
        "# zsh completion for dfarm: generated from dfarm's --help by",
        "# packaging/gen_completions.py (do not edit).",
        "_dfarm() {",
        '  local cmdpath="" w i',
        "  local -a subs opts",
        "  for ((i = 2; i < CURRENT; i++)); do",
        "    w=${words[i]}",
        "    [[ $w == -* ]] && continue",
        '    case "$cmdpath/$w" in',
        f'      ({known}) cmdpath="$cmdpath/$w" ;;',
        "    esac",
        "  done",
        '  case "$cmdpath" in',
    ]
    for key, (_, options, subs) in tree.items():
        pattern = key if key else '""'
        described = " ".join(zsh_quote(n + ":" + d) for n, d in subs)
        lines.append(f"    ({pattern}) subs=({described}); opts=({' '.join(options)}) ;;")
    lines += [
        "  esac",
        "  if [[ $PREFIX == -* ]]; then",
        "    compadd -- $opts",
        "  elif (( $#subs )); then",
        "    _describe -t commands 'dfarm command' subs",
        "  else",
        "    _files",
        "  fi",
        "}",
        '_dfarm "$@"',
        "",
    ]
    return "\n".join(lines)


def roff_lines(text):
    out = []
    for line in text.rstrip("\n").splitlines():
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return out


def man_include(tree):
    lines = ["[SUBCOMMANDS]"]
    for key, (text, _, _) in tree.items():
        if not key:
            continue
        lines += [f'.SS "dfarm {key[1:].replace("/", " ")}"', ".nf"] + roff_lines(text) + [".fi"]
    lines += [
        "[SEE ALSO]",
        ".BR dfarm (7),",
        ".BR dfarm\\-agent (1),",
        ".BR dfarm\\-runner (1),",
        ".BR dfarm\\-dashboard (1)",
        "",
    ]
    return "\n".join(lines)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    dfarm, outdir = sys.argv[1], sys.argv[2]
    tree = walk(dfarm)
    write(os.path.join(outdir, "completions", "dfarm"), bash(tree))
    write(os.path.join(outdir, "completions", "_dfarm"), zsh(tree))
    write(os.path.join(outdir, "man", "dfarm.h2m"), man_include(tree))


if __name__ == "__main__":
    main()
