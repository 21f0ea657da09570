"""The README's and docs/' blocks marked ``<!-- offline-test -->`` run as written in a fresh folder
(how blocks are marked, checked quickly: tests/unit/test_readme.py). The run and its checks live in
tests/support/doc_blocks.py, which .ci/run's canary also runs in the README's plain install."""

from tests.support.doc_blocks import run_blocks


def test_marked_blocks_run_offline_in_a_fresh_folder(tmp_path):
    run_blocks(tmp_path)
