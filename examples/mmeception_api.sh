#!/usr/bin/env bash
# The paper's setting: GPT-4o describes, DALL-E 3 draws. Keys come from the environment.
set -euo pipefail
: "${OPENAI_API_KEY:?set OPENAI_API_KEY}"
lmms-eval --model cycle \
  --model_args describer=openai,describer.model_version=gpt-4o,generator=openai,generator.model=dall-e-3,generator.size=1024x1024,generator.quality=standard,artifacts=./artifacts \
  --tasks mmeception --output_path ./logs --log_samples
