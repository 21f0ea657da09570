#!/usr/bin/env bash
# GenCeption on any folder of images: sub-folders become categories.
set -euo pipefail
folder=${1:?usage: own_folder.sh /path/to/images}
MMECEPTION_IMAGE_DIR="$folder" lmms-eval --model cycle \
  --model_args describer=qwen2_5_vl,describer.pretrained=Qwen/Qwen2.5-VL-7B-Instruct,generator=diffusers,generator.pretrained=black-forest-labs/FLUX.1-schnell,generator.steps=4,generator.guidance=0.0 \
  --tasks mmeception_folder --output_path ./logs --log_samples
