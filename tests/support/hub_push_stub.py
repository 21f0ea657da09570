"""``lmms-eval`` with its Hugging Face hub uploads redirected into a local folder.

``python -m tests.support.hub_push_stub <folder> <lmms-eval arguments...>`` runs the real command
(``lmms_eval.cli.dispatch.main``) in this process after replacing the three ``HfApi``
methods its ``EvaluationTracker`` pushes with (``create_repo``, ``upload_file``,
``upload_folder``) by copies into ``<folder>/<repo_id>/<path_in_repo>``, and its
``recreate_metadata_card`` (which reads the repository back over HTTP) by a note in
``<folder>/metadata_card_calls.txt``. Nothing else is changed: ``--hf_hub_log_args``
is parsed, the tracker built and the results and samples files written by lmms-eval.
"""

import shutil
import sys
from pathlib import Path


def install(root: Path) -> None:
    from huggingface_hub import HfApi
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker

    def create_repo(self, repo_id, **kwargs):
        (root / repo_id).mkdir(parents=True, exist_ok=True)

    def upload_file(self, *, path_or_fileobj, path_in_repo, repo_id, **kwargs):
        target = root / repo_id / path_in_repo
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path_or_fileobj, target)

    def upload_folder(self, *, repo_id, folder_path, path_in_repo=None, **kwargs):
        shutil.copytree(folder_path, root / repo_id / (path_in_repo or ""), dirs_exist_ok=True)

    def recreate_metadata_card(self):
        with open(root / "metadata_card_calls.txt", "a", encoding="utf-8") as fh:
            fh.write(f"{self.details_repo}\n")

    HfApi.create_repo, HfApi.upload_file, HfApi.upload_folder = create_repo, upload_file, upload_folder
    EvaluationTracker.recreate_metadata_card = recreate_metadata_card


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    install(folder)
    sys.argv = ["lmms-eval", *sys.argv[2:]]
    from lmms_eval.cli.dispatch import main

    sys.exit(main())
