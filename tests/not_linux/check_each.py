"""Run the bundle's `check` on many folders in one Python: `python check_each.py JOBS OUT`, from the bundle's folder.

JOBS is a JSON list of [folder, [component ids]]; OUT receives, for each job in order, what `check ids... --dir folder`
printed on stdout and on stderr, and its exit status. One process for all of them, so that a test pays Python's and
the grader's start-up once; each check still starts its own workers, as a student's does.
"""
import contextlib
import io
import json
import sys

from autograder.cli import main

jobs = json.loads(open(sys.argv[1]).read())
results = []
for folder, components in jobs:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["check", *components, "--dir", folder])
    results.append({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()})
with open(sys.argv[2], "w") as f:
    json.dump(results, f)
