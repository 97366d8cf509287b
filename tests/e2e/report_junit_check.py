#!/usr/bin/env python3
"""Reads a JUnit XML file back with Debian's python3-junitparser: one testcase
per cell of the run (cells from the report's JSON rows: model sha256,
delegate, options, threads, runner, device), at least one failure (the run
has cells that fail), and every failure or error carries a message.
Usage: report_junit_check.py REPORT.xml ROWS.json"""
import json
import sys

from junitparser import Error, Failure, JUnitXml, TestSuite


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


xml_path, rows_path = sys.argv[1], sys.argv[2]
rows = json.load(open(rows_path))["jobs"]
cells = {(r["model_sha256"], r["delegate"], r["delegate_options"], r["num_threads"],
          r["runner"], r["device"]) for r in rows}
xml = JUnitXml.fromfile(xml_path)
suites = [xml] if isinstance(xml, TestSuite) else list(xml)
cases = [case for suite in suites for case in suite]
print(f"{xml_path}: {len(cases)} testcases, {len(cells)} cells")
if len(cases) != len(cells):
    fail(f"{len(cases)} testcases for {len(cells)} cells")
failures = 0
for case in cases:
    if not case.name:
        fail("a testcase without a name")
    for result in case.result:
        if isinstance(result, (Failure, Error)):
            failures += 1
            if not (result.message or "").strip():
                fail(f"testcase '{case.name}' has a failure without a message")
if failures == 0:
    fail("no failing testcase, but the run has cells whose plugin cannot load")
print(f"PASS: {failures} failing testcases, each with a message")
