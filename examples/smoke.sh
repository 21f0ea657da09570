#!/usr/bin/env bash
# Offline quickstart: the whole MMECeption protocol on nine package photos (random-weight models).
set -euo pipefail
lmms-eval --model cycle --model_args preset=smoke --tasks mmeception_smoke --output_path ./logs --log_samples
