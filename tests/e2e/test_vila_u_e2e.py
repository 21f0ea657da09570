"""unified=vila_u through the front door: docs/models.md's command on sdp_nocaps, the checkpoint fetched
from the local Hub under its real id (mit-han-lab/vila-u-7b-256, served from the committed parity
checkpoint in the authors' layout)."""

from tests.support.unified_runs import run_unified


def test_the_unified_vila_u_command_on_a_cpu(local_hub, tmp_path):
    # 3 docs scored, all four mappings a cosine: run_unified's checks
    args = "unified=vila_u,unified.pretrained=mit-han-lab/vila-u-7b-256,unified.device=cpu,unified.dtype=float32"
    run_unified(local_hub, tmp_path, args, ["mit-han-lab/vila-u-7b-256"], OMP_NUM_THREADS="1")
