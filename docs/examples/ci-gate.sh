#!/bin/sh
# The release gate in CI: README.md's "Release gate" snippet, verbatim below the comments
# (tests/e2e/gate_e2e_test.cc runs this file). Sweeps release.json (the candidate build: its
# runner, delegates and models), tags the run candidate-$CI_COMMIT_SHA, gates it against the
# run tagged `release`, and writes JUnit XML to gate.xml. Run it in the folder that holds
# release.json and farm.db, with `dfarm` on PATH.
#
# farm.db must survive between CI jobs (a cache or a shared volume): it holds the baseline.
# Once, before the first gate: `dfarm tag RUN release`; after a release:
# `dfarm tag tag:candidate-<commit> release --move`.
#
# `dfarm sweep` prints the run id. It exits 1 when the run is complete but some job crashed,
# timed out or was unsupported: the gate judges those jobs (a cell ok in the baseline, or a new
# cell, that fails now fails the gate), so the snippet goes on. 2 (bad spec), 3 (no device) or
# 130 (interrupted) leave no run to judge: it stops with that code. `tag --move`: a retried job
# for the same commit moves the tag to its new run. The exit code is then the gate's: 0 pass,
# 1 gate failed, 2 usage or data error, 3 infrastructure.

export DFARM_DB=farm.db   # kept between CI jobs (a cache or a shared volume): it holds the baseline
run=$(dfarm sweep release.json); status=$?
[ "$status" -le 1 ] && [ -n "$run" ] || exit "$status"  # 1: some job failed, the gate judges it
dfarm tag "$run" "candidate-$CI_COMMIT_SHA" --move || exit
dfarm gate "tag:candidate-$CI_COMMIT_SHA" --baseline tag:release --format junit -o gate.xml
