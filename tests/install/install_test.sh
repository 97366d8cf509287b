#!/usr/bin/env bash
# Installs the build into a temporary prefix and checks that the installed
# tree works on its own: its files (programs, man pages, shell
# completions, systemd units, the plugin SDK), then a sweep on `local` run by
# the installed dfarm with no DFARM_* overrides and no build folder on PATH.
#
# The build folder is never moved (other tests use it in parallel): the tree is
# installed to PREFIX1, copied to PREFIX2 and PREFIX1 deleted, so every path the
# install wrote is gone; dfarm finds its agent and runner relative to
# /proc/self/exe, so a run from PREFIX2 that reports PREFIX2's programs (the
# checks with a program moved away below) used nothing of the build folder.
#
# usage: install_test.sh BUILD_DIR SOURCE_DIR MODELS_DIR "PROGRAMS" HAVE_MAN HAVE_COMPLETIONS "DELEGATES"
# Exit 77 (skipped) when the model is missing (scripts/setup.sh fetches it).
set -euo pipefail
BUILD="$1" SRC="$2" MODELS="$3" PROGRAMS="$4" HAVE_MAN="$5" HAVE_COMPLETIONS="$6" DELEGATES="$7"
MODEL="$MODELS/face_detection_short_range.tflite"

fail() { echo "FAIL: $*" >&2; exit 1; }
need_file() { [ -f "$1" ] || fail "missing $1"; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

need_file "$SRC/LICENSE"
grep -q "Apache License" "$SRC/LICENSE" || fail "LICENSE is not the Apache License"

# Install, then keep only a copy elsewhere.
cmake --install "$BUILD" --prefix "$TMP/staged" >"$TMP/install.log" || {
  cat "$TMP/install.log" >&2; fail "cmake --install"; }
for unit in dfarm-agent.service dfarm-node.service; do
  need_file "$TMP/staged/lib/systemd/system/$unit"
done
grep -q "^ExecStart=$TMP/staged/bin/dfarm-agent " "$TMP/staged/lib/systemd/system/dfarm-agent.service" ||
  fail "dfarm-agent.service does not start the installed dfarm-agent"
grep -q "^ExecStart=$TMP/staged/bin/dfarm node " "$TMP/staged/lib/systemd/system/dfarm-node.service" ||
  fail "dfarm-node.service does not start the installed dfarm"
cp -a "$TMP/staged" "$TMP/p"
rm -rf "$TMP/staged"
P="$TMP/p"

# Files.
for prog in $PROGRAMS; do
  [ -x "$P/bin/$prog" ] || fail "missing program $P/bin/$prog"
done
need_file "$P/share/man/man7/dfarm.7"
if [ "$HAVE_MAN" = ON ]; then
  for prog in $PROGRAMS; do need_file "$P/share/man/man1/$prog.1"; done
  grep -q '^\.SH SUBCOMMANDS' "$P/share/man/man1/dfarm.1" || fail "dfarm.1 has no SUBCOMMANDS"
else
  echo "note: man pages were not generated (help2man missing): not checked"
fi
need_file "$P/include/dfarm/dfarm_delegate_plugin.h"
pc="$(find "$P/lib" -name dfarm-delegate-plugin.pc | head -n1)"
need_file "$pc"
plugin="$(find "$P/lib" -path '*/dfarm/plugins/libdfarm_example_delegate.so' | head -n1)"
need_file "$plugin"

# dfarm's subcommands, as its --help lists them, are all in the completions.
subs="$("$P/bin/dfarm" --help | awk '/^Subcommands:/ {on=1; next} on && /^  [a-z]/ {print $1}')"
[ -n "$subs" ] || fail "no subcommands in dfarm --help"
if [ "$HAVE_COMPLETIONS" = ON ]; then
  bash_c="$P/share/bash-completion/completions/dfarm"
  zsh_c="$P/share/zsh/vendor-completions/_dfarm"
  need_file "$bash_c"; need_file "$zsh_c"
  got="$(bash -c 'source "$1"; COMP_WORDS=(dfarm ""); COMP_CWORD=1; _dfarm; printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_c")"
  for s in $subs; do
    grep -qx "$s" <<<"$got" || fail "bash completion of 'dfarm ' lacks '$s'"
    grep -q "'$s:" "$zsh_c" || fail "zsh completion lacks '$s'"
  done
  got="$(bash -c 'source "$1"; COMP_WORDS=(dfarm sweep --res); COMP_CWORD=2; _dfarm; echo "${COMPREPLY[*]}"' _ "$bash_c")"
  [ "$got" = "--resume" ] || fail "bash completion of 'dfarm sweep --res' gave '$got'"
fi

# The plugin SDK: the installed example builds against the installed header
# through pkg-config.
cp -r "$P/share/dfarm/examples/plugin" "$TMP/plugin"
PKG_CONFIG_PATH="$(dirname "$pc")" make -s -C "$TMP/plugin" \
  PLUGIN_CFLAGS="$(PKG_CONFIG_PATH="$(dirname "$pc")" pkg-config --define-variable=prefix="$P" --cflags dfarm-delegate-plugin)" >/dev/null ||
  fail "the example plugin does not build against the installed SDK"
nm -D "$TMP/plugin/libexample_delegate.so" | grep -q ' T dfarm_delegate_plugin_get_api$' ||
  fail "the example plugin built from the SDK does not export dfarm_delegate_plugin_get_api"

# Run the installed programs alone: no DFARM_* overrides, no build folder on PATH.
if [ ! -f "$MODEL" ]; then
  echo "SKIP: $MODEL missing (scripts/setup.sh fetches it)"; exit 77
fi
while IFS= read -r v; do unset "$v"; done < <(compgen -e | grep '^DFARM_' || true)
PATH="$(tr ':' '\n' <<<"$PATH" | grep -v -F "$BUILD" | paste -sd: -)"
export PATH XDG_CACHE_HOME="$TMP/cache"
cd "$TMP"
delegates=""
for d in $DELEGATES; do delegates="$delegates${delegates:+,}{\"name\":\"$d\"}"; done
cat >spec.json <<JSON
{"name":"installed","models":["$MODEL"],"delegates":[$delegates],"devices":["local"],
 "benchmark":{"warmup_runs":1,"num_runs":3}}
JSON
"$P/bin/dfarm" sweep spec.json --db "$TMP/r.db" --json >sweep.json 2>sweep.err || {
  cat sweep.err >&2; fail "the installed dfarm's sweep failed (exit $?)"; }
python3 - "$TMP/sweep.json" "$DELEGATES" <<'PY' || fail "sweep: not every job ok: $(cat sweep.json)"
import json, sys
r = json.load(open(sys.argv[1]))
want = len(sys.argv[2].split())
sys.exit(0 if r["jobs"] == want and r["ok"] == want and r["failed"] == 0 else 1)
PY
echo "sweep ok: $(cat sweep.json)"

# Which programs it ran: with the prefix's runner, then agent, moved away the
# same command names the paths it looks for, which must be the prefix's.
mv "$P/bin/dfarm-runner" "$TMP/dfarm-runner.away"
if "$P/bin/dfarm" sweep spec.json --db "$TMP/r2.db" >/dev/null 2>err.txt; then
  fail "a sweep without the prefix's dfarm-runner passed: it used another runner"
fi
grep -q -F "$P/bin/dfarm-runner" err.txt || fail "runner lookup: $(cat err.txt)"
mv "$TMP/dfarm-runner.away" "$P/bin/dfarm-runner"
mv "$P/bin/dfarm-agent" "$TMP/dfarm-agent.away"
if "$P/bin/dfarm" devices --device local --db "$TMP/r.db" --json >devices.json 2>err.txt; then
  fail "devices without the prefix's dfarm-agent found local online: it used another agent"
fi
grep -q -F "$P/bin/dfarm-agent" devices.json err.txt || fail "agent lookup: $(cat devices.json err.txt)"
mv "$TMP/dfarm-agent.away" "$P/bin/dfarm-agent"

# The arm64 device programs, when the cross build was installed: qemu-arm64
# starts the prefix's aarch64 agent.
if [ -x "$P/share/dfarm/arm64/bin/dfarm-agent" ] && command -v qemu-aarch64 >/dev/null &&
   [ -d /usr/aarch64-linux-gnu ]; then
  "$P/bin/dfarm" devices --device qemu-arm64 --db "$TMP/r.db" --json >qemu.json 2>err.txt ||
    fail "qemu-arm64 with the installed arm64 agent: $(cat qemu.json err.txt)"
  grep -q '"state": *"online"' qemu.json || fail "qemu-arm64 not online: $(cat qemu.json)"
  echo "qemu-arm64 online with $P/share/dfarm/arm64/bin/dfarm-agent"
else
  echo "note: no installed arm64 build or no qemu-aarch64: qemu-arm64 not checked"
fi
echo "PASS"
