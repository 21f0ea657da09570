"""Exit 1 unless ``<logs>`` holds one lmms-eval results file in which each named task scored
docs and failed none (lmms-eval exits 0 even when a task crashed)."""

import json
import sys
from pathlib import Path

logs, tasks = Path(sys.argv[1]), sys.argv[2:]
files = sorted(logs.rglob("*_results.json"))
if len(files) != 1:
    sys.exit(f"check_results: expected one results file under {logs}, found {len(files)}")
results = json.loads(files[0].read_text())["results"]
for task in tasks:
    got = results.get(task, {})
    if not got.get("n_scored,none") or got.get("n_failed,none") != 0:
        sys.exit(f"check_results: {task} scored {got.get('n_scored,none')} docs, failed {got.get('n_failed,none')}")
print(f"check_results: {', '.join(tasks)} scored, none failed ({files[0]})")
