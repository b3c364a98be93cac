#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the grading image (Ubuntu): Python, the pinned
# packages and the grader go into $AUTOGRADER_ROOT/venv, and the build fails unless the image can
# grade at the required isolation tier.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"
# PyPI's torch wheel pulls gigabytes of CUDA packages; this index holds the CPU build. Empty: pip's own indexes only.
TORCH_INDEX="${AUTOGRADER_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
REQUIRE_TIER="${AUTOGRADER_REQUIRE_TIER:-root}"
umask 022  # workers run as another uid and must be able to read the venv's Python

find_python() {  # the first Python >= 3.11 that can make a venv (Debian strips ensurepip into python3.X-venv)
    local candidate
    for candidate in python3.11 python3.12 python3.13 python3; do
        if command -v "$candidate" >/dev/null &&
            "$candidate" -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

apt_install() {
    command -v apt-get >/dev/null && apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

if ! PYTHON="$(find_python)"; then
    echo "setup.sh: no Python >= 3.11 with venv here; installing python3.11 with apt-get"
    apt_install python3.11 python3.11-venv || true
    PYTHON="$(find_python)" || {
        echo "setup.sh: error: no Python >= 3.11 with venv (tried python3.11, python3.12, python3.13, python3), and apt-get could not install python3.11 python3.11-venv" >&2
        exit 1
    }
fi
# Optional: with bwrap the root tier also gives each worker private mounts and PIDs (SECURITY.md).
if ! command -v bwrap >/dev/null; then
    apt_install bubblewrap || echo "setup.sh: warning: bubblewrap could not be installed; the root tier works without it"
fi

echo "setup.sh: $("$PYTHON" --version) at $PYTHON; venv in $VENV"
"$PYTHON" -m venv --clear "$VENV"
pip_install() {
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-cache-dir \
        -c "$SOURCE/constraints.txt" "$@"
}
# torch first, from its pin, so that nothing later pulls another build of it.
pip_install ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} torch==2.13.0
# Editable: the package stays in source/ beside the rubric and the solutions, which the grader hides
# from students as one folder (tiers.grader_files); workers need none of it (they run their own copy
# of sandbox/worker/).
pip_install -e "$SOURCE"

# The root tier needs no account: each worker runs as a uid of its own (2^30 + the grader's pid).
# What it does need is that Python starts as that uid here, so prove it now rather than grade every
# submission 0 later.
if ! "$VENV/bin/python" - "$SOURCE/grading.yaml" "$REQUIRE_TIER" <<'PY'
import sys
from pathlib import Path

from autograder.rubric import load_rubric
from autograder.sandbox.host.tiers import choose_tier, grader_files

rubric = load_rubric(Path(sys.argv[1]))
tier = choose_tier(grader_files(rubric.path.parent, rubric.solutions_dir, []), sys.argv[2])
print(f"setup.sh: isolation: {tier.name} ({tier.guarantees})", *tier.notes, sep="\n  ")
PY
then
    echo "setup.sh: error: this image cannot grade at the $REQUIRE_TIER tier (above); run_autograder would refuse every submission" >&2
    exit 1
fi
