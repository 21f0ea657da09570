#!/usr/bin/env bash
# The Semantic Drift paper's Table 1 (paper 003): its seven systems on the Semantic Drift Protocol
# (sdp_nocaps: MCD over the 400 NoCaps+DOCCI pairs, both directions; sdp_geneval: MGG over GenEval's
# 553 prompts), one row each. On one GPU per row; a rerun of the same command resumes from the store.
#
#   bash examples/sdp_paper.sh            # every row, in turn
#   bash examples/sdp_paper.sh showo      # one row: bagel showo janus janus_pro vila_u blip3o llava_sdxl
#
# Each row runs `lmms-genbench check` first (seconds, nothing loaded: ids, files, the Hub, CUDA), then
# lmms-eval. Memory per model (weights only): docs/generators.md; how each model runs and what was
# compared with its authors' code: docs/support.md.
set -euo pipefail
out=${OUT:-./logs_sdp_paper}
tasks=${TASKS:-sdp_nocaps,sdp_geneval}
only=${1:-}
rows=() ran=0

row() {
  local name=$1 args=$2
  rows+=("$name")
  [ -n "$only" ] && [ "$only" != "$name" ] && return 0
  ran=1
  echo "== $name"
  lmms-genbench check --model cycle --model_args "$args" --tasks "$tasks" --output_path "$out/$name"
  lmms-eval --model cycle --model_args "$args" --tasks "$tasks" --output_path "$out/$name" --log_samples
}

# Table 1's rows, in its order. Each model's arguments and their defaults' sources: docs/models.md.
row bagel "unified=bagel,unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT,unified.device=cuda,unified.dtype=bfloat16"
row showo "unified=showo,unified.pretrained=showlab/show-o-512x512,unified.vq_model=showlab/magvitv2,unified.tokenizer=microsoft/phi-1_5,unified.device=cuda"
row janus "unified=janus,unified.pretrained=deepseek-ai/Janus-1.3B,unified.device=cuda,unified.dtype=bfloat16"
row janus_pro "unified=janus,unified.pretrained=deepseek-community/Janus-Pro-7B,unified.device=cuda,unified.dtype=bfloat16"
row vila_u "unified=vila_u,unified.pretrained=mit-han-lab/vila-u-7b-256,unified.device=cuda,unified.dtype=bfloat16"
row blip3o "unified=blip3o,unified.pretrained=BLIP3o/BLIP3o-Model-4B,unified.device=cuda"
row llava_sdxl "describer=llava_hf,describer.pretrained=llava-hf/llava-1.5-7b-hf,describer.device_map=cuda,generator=diffusers,generator.pretrained=stabilityai/stable-diffusion-xl-base-1.0"
if [ "$ran" = 0 ]; then
  echo "sdp_paper.sh: no row '$only'; the rows are: ${rows[*]}" >&2
  exit 2
fi
