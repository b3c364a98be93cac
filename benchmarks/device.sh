#!/usr/bin/env bash
# The GPU timing path proven on a lent GPU machine (issue 18, item 5), from the repository root, in one run:
#
#   OUT=/some/folder AUTOGRADER_COMMIT=<sha> bash benchmarks/device.sh
#
# carrying .whl/ (pydantic, nbformat and their dependencies for Python 3.12, which such a machine lacks and cannot
# download) and .ray/ (Ray's wheel, pruned to fit: see stage 1). Stages, each under its own timeout within BUDGET_S seconds (default 330), in order of what matters most:
#   0. diagnostics: the GPU, the driver, torch, where libcuda is found, and whether torch sees CUDA from an empty
#      environment (as a worker starts), under a worker's memory limit and as an unprivileged uid;
#   1. install the carried wheels into /tmp/site (skipped where they import already), then ask the grader's own
#      workers whether they see the GPU (benchmarks/run.py --probe);
#   2. tests/test_gpu.py (the tests marked gpu, and the environment ones);
#   3. the GPU benchmarks (benchmarks/run.py --gpu-only) into $OUT/gpu.json and $OUT/gpu.md;
#   4. tests/test_timing.py, which runs at the GPU's shapes there.
# Everything goes to $OUT (default /tmp/device-out), 7 files at most: 0-diagnostics.log (stages 0 and 1),
# 1-test-gpu.log, 2-bench.log, 3-test-timing.log, gpu.json, gpu.md and summary.txt (printed last). Without a GPU
# (this script runs anywhere, PYTHON=.venv/bin/python on a dev machine) stages 3 and 4 are skipped, saying so.
# Copy $OUT/gpu.json to benchmarks/gpu.json and run `benchmarks/run.py --refresh-gpu-section` to put the figures
# into BENCHMARKS.md; never write figures there by hand.
set -u -o pipefail  # not -e: every stage runs and says how it ended

if [ "${1:-}" = install ]; then  # stage 1, run by the stage below under its timeout
  if "$PY" -c "import pydantic, nbformat" 2>/dev/null; then
    echo "pydantic and nbformat import already"
  else
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && "$PY" -c "import pydantic, nbformat; print('installed: pydantic', pydantic.VERSION, 'nbformat', nbformat.__version__)" \
      || exit
  fi
  # Ray's wheel is larger than what may travel to such a machine: carry it as .ray/ray-pruned.zip, the wheel less its
  # Java jars and the dashboard's web client, which nothing here uses, unpacked beside the other wheels (after them:
  # it imports jsonschema, one of them).
  if [ -f .ray/ray-pruned.zip ] && ! "$PY" -c "import ray" 2>/dev/null; then
    "$PY" -c "import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:  # as unzip would: Ray's gcs_server and raylet must stay executable
    for info in z.infolist():
        os.chmod(z.extract(info, '/tmp/site'), (info.external_attr >> 16) or 0o644)" .ray/ray-pruned.zip \
      && "$PY" -c "import ray; print('unpacked: ray', ray.__version__)"
  fi
  exit
fi

if [ "${1:-}" = diagnostics ]; then  # stage 0, run by the stage below under its timeout
  py=$PY
  # What a worker does first with the GPU: is CUDA there, and can it compute?
  check='import torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "available:", torch.cuda.is_available())
try:
    torch.cuda.init()
    print("computes on", torch.cuda.get_device_name(0), float(torch.ones(1024, device="cuda").sum()) == 1024)
except Exception as exc:
    print("cannot compute:", type(exc).__name__, exc)'
  limited="import resource; resource.setrlimit(resource.RLIMIT_DATA, (4 << 30, 4 << 30))
$check"
  uid=$((1 << 30))  # a uid with no account, as the root tier gives students (tiers.STUDENT_ID_BASE)
  echo "## machine"; uname -a; nproc; free -g 2>/dev/null | head -2
  echo "## nvidia-smi"; timeout 30 nvidia-smi || echo "(nvidia-smi: status $?)"
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null
  echo "## python: $py"; "$py" -VV
  echo "## environment"; env | grep -i -E 'cuda|ld_library|nvidia' || echo "(no CUDA, LD_LIBRARY_PATH or NVIDIA variable)"
  echo "## libcuda in ld.so.cache"; ldconfig -p 2>/dev/null | grep -E 'libcuda\.so' || echo "(none: only LD_LIBRARY_PATH can find it)"
  echo "## devices"; ls -l /dev/nvidia* 2>&1
  echo "## bwrap: $(command -v bwrap || echo 'not installed'); setpriv: $(command -v setpriv || echo 'not installed')"
  echo "## torch, the grader's environment"; timeout 60 "$py" -c "$check"
  echo "## torch, an empty environment (as a worker starts, before process.worker_env)"; timeout 60 env -i "$py" -I -c "$check"
  echo "## torch, empty environment, a worker's RLIMIT_DATA (4 GiB)"; timeout 60 env -i "$py" -I -c "$limited"
  echo "## torch, empty environment, uid $uid"
  if command -v setpriv >/dev/null; then
    timeout 60 setpriv --reuid=$uid --regid=$uid --clear-groups env -i "$py" -I -c "$check"
  else
    timeout 60 env -i "$py" -I -c "import os; os.setgroups([]); os.setresgid($uid, $uid, $uid); os.setresuid($uid, $uid, $uid)
$check"
  fi
  exit 0
fi

cd "$(dirname "$0")/.." || exit 2
PY=$(command -v "${PYTHON:-python3}") || { echo "no ${PYTHON:-python3}"; exit 2; }
case $PY in /*) ;; *) PY=$PWD/$PY ;; esac  # absolute: stage 0 runs it from an empty environment
export PY
OUT=${OUT:-/tmp/device-out}
BUDGET_S=${BUDGET_S:-330}
mkdir -p "$OUT"
export PYTHONPATH="/tmp/site:$PWD"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
start=$SECONDS

# stage NAME LOG CAP COMMAND...: COMMAND under `timeout`, the smaller of CAP and what is left of the budget,
# its output appended to $OUT/LOG and shown; one line of the summary says how it ended and how long it took.
stage() {
  local name=$1 log=$2 cap=$3
  shift 3
  local left=$((BUDGET_S - (SECONDS - start)))
  local limit=$((cap < left ? cap : left))
  if [ "$limit" -lt 20 ]; then
    printf '%-34s skipped: the %s s budget is spent\n' "$name" "$BUDGET_S" >>"$SUMMARY"
    return 0
  fi
  echo "=== $name: $* (timeout ${limit} s, $(date -u +%H:%M:%S) UTC)" | tee -a "$OUT/$log"
  local began=$SECONDS
  timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$OUT/$log"
  local rc=${PIPESTATUS[0]} how
  case $rc in 0) how=ok ;; 124 | 137) how="TIMED OUT after ${limit} s" ;; *) how="FAILED (status $rc)" ;; esac
  printf '%-34s %-26s %4d s  (%s)\n' "$name" "$how" $((SECONDS - began)) "$log" >>"$SUMMARY"
  return "$rc"
}

# The last line pytest printed ("5 passed, 2 skipped in 61.2s"), for the summary.
tally() { grep -E '(passed|failed|error|skipped|no tests ran)' "$OUT/$1" | tail -1 | sed 's/^=* *//; s/ *=*$//'; }

stage "0 diagnostics" 0-diagnostics.log 90 bash benchmarks/device.sh diagnostics
stage "1 install the wheels" 0-diagnostics.log 60 bash benchmarks/device.sh install
stage "1 worker_env" 0-diagnostics.log 90 "$PY" -c \
  'from autograder.sandbox.host.process import worker_env; print("worker_env():", worker_env())' \
  && stage "1 probe (run.py --probe)" 0-diagnostics.log 120 "$PY" benchmarks/run.py --probe
probe=$?
pytest=("$PY" -m pytest -q -rs -p no:cacheprovider)
stage "2 tests/test_gpu.py" 1-test-gpu.log 180 "${pytest[@]}" tests/test_gpu.py
if [ "$probe" -eq 0 ]; then
  stage "3 GPU benchmarks (--gpu-only)" 2-bench.log 300 "$PY" benchmarks/run.py --gpu-only --gpu-json "$OUT/gpu.json" --out "$OUT/gpu.md"
  stage "4 tests/test_timing.py" 3-test-timing.log 240 "${pytest[@]}" tests/test_timing.py
else
  printf '%-34s skipped: the probe found no GPU the workers can use (status %s; see 0-diagnostics.log)\n' \
    "3, 4 GPU benchmarks, test_timing" "$probe" >>"$SUMMARY"
fi

{
  echo
  echo "pytest: test_gpu.py: $(tally 1-test-gpu.log)"
  [ -f "$OUT/3-test-timing.log" ] && echo "pytest: test_timing.py: $(tally 3-test-timing.log)"
  grep -h '"timing_device"' "$OUT/0-diagnostics.log" | tail -1 | sed 's/^\[ *[0-9]* s\] /probe: /'
  if [ -f "$OUT/gpu.json" ]; then
    "$PY" - "$OUT/gpu.json" <<'EOF'
import json, sys
from statistics import median

figures = json.load(open(sys.argv[1]))
m = figures["measured"]
print(f"gpu.json: {m['date']}, {m['minutes']} min, {'complete' if m['complete'] else 'INCOMPLETE'}")
for part in ("stability", "memory", "builtins", "variants", "batch"):
    data = figures.get(part)
    if data is None or "error" in data:
        print(f"  {part}: {'not reached' if data is None else 'FAILED: ' + data['error']}")
    elif part == "stability":
        for name, results in data.items():
            ratios = [r["extra"]["ratio"] for r in results if "ratio" in r["extra"]]
            full = sum(r["passed"] and r["fraction"] == 1 for r in results)
            print(f"  {name}: ratio {min(ratios):.2f} / {median(ratios):.2f} / {max(ratios):.2f}, full marks {full}/{len(results)}")
    elif part == "batch":
        full = {b: f"{sum(v['full'] for v in vs)}/{len(vs)} on {sorted({v['device'] for v in vs})}" for b, vs in data["timing"].items()}
        print(f"  batch of {data['size']}: seconds {data['seconds']}, same csv {data['same_csv']}, full timing marks {full}")
    elif part == "builtins":
        for r in data["results"]:
            print(f"  {r['name']}: reference / built-in {r['ratio']:.2f}")
    else:
        for k, r in data:
            points = f"{r['fraction']:.0%} of points" if r["passed"] else "FAILED"
            print(f"  {part} {k}: {r['case']}: ratio {r['extra'].get('ratio', '-')}, memory {r['extra'].get('memory_ratio')}, {points}")
EOF
  fi
  echo "total: $((SECONDS - start)) s of a ${BUDGET_S} s budget; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
} >>"$SUMMARY"
echo
echo "=================== summary"
cat "$SUMMARY"
