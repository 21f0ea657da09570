#!/usr/bin/env bash
# Regenerate CI's lock, .ci/requirements.lock: every package `pip install ".[dev]"` resolves to
# today, pinned exactly, for this machine's Python and platform. Needs uv (`pip install uv`).
# A machine whose pip config caps a package (PIP_CONSTRAINT or pip's global `constraint`) passes
# the cap on, so the lock installs there with plain pip.
set -euo pipefail
cd "$(dirname "$0")/.."
caps=()
for c in ${PIP_CONSTRAINT:-} $(pip config list 2>/dev/null | sed -n "s/^global\.constraint='\(.*\)'$/\1/p"); do
  [ -f "$c" ] && caps+=(--constraint "$c")
done
uv pip compile pyproject.toml --extra dev --python "$(command -v python3)" --no-header \
  "${caps[@]}" --annotation-style line -o .ci/requirements.lock "$@"
sed -i "1i # CI installs exactly these (.ci/run). Regenerate: bash scripts/lock.sh (CONTRIBUTING, \"The lock\")." \
  .ci/requirements.lock
