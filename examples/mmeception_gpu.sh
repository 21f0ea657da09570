#!/usr/bin/env bash
# MMECeption with a local describer (transformers) and a diffusers generator on 8 GPUs.
# Rerunning the same command resumes from the artifact store.
set -euo pipefail
gpus=${GPUS:-8}
args=describer=llava_hf,describer.pretrained=llava-hf/llava-1.5-7b-hf,describer.device_map=cuda,generator=diffusers,generator.pretrained=stabilityai/stable-diffusion-3.5-medium,generator.steps=28,generator.guidance=4.5,generator.batch_size=8,artifacts=./artifacts
# seconds, before any process starts or weight loads: the GPUs, the Hub, the ids, MME's terms
lmms-genbench check --model cycle --model_args "$args" --tasks mmeception --output_path ./logs --num_processes "$gpus"
accelerate launch --num_processes "$gpus" -m lmms_eval --model cycle --model_args "$args" \
  --tasks mmeception --output_path ./logs --log_samples
