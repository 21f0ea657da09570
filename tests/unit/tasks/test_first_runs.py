"""A first run that explains itself (issue 33, item 6), in-process: the folder task's docs
from an empty or image-less folder are one line, and a smoke model decodes the smoke task's
few tokens whatever task it runs (the end-to-end runs: tests/unit/preflight/test_preflight.py)."""

import json

import pytest

from lmms_genbench.core.errors import ActionableError


@pytest.mark.parametrize("folder", [None, "empty", "text-only", "missing"])
def test_the_folder_task_without_pictures_is_one_line(folder, tmp_path, monkeypatch):
    from lmms_genbench.tasks.mmeception import utils

    if folder is None:
        monkeypatch.delenv(utils.FOLDER_ENV, raising=False)
    else:
        path = tmp_path / folder
        if folder != "missing":
            path.mkdir()
        if folder == "text-only":
            (path / "notes.txt").write_text("no picture")
        monkeypatch.setenv(utils.FOLDER_ENV, str(path))
    with pytest.raises(ActionableError) as info:
        utils.folder_docs(None)
    line = str(info.value)
    assert line.startswith("lmms-genbench: error: task mmeception_folder") and "Fix: set MMECEPTION_IMAGE_DIR" in line
    assert "\n" not in line


def test_a_smoke_model_decodes_the_smoke_tasks_few_tokens(tmp_path):
    from lmms_genbench.models.cycle import CycleModel

    model = CycleModel(preset="smoke", artifacts=str(tmp_path))
    paper = {"iterations": 3, "max_new_tokens": 512, "until": [], "temperature": 0, "do_sample": False}
    spec = model._spec("P", json.dumps(paper), None)
    assert spec.describer_kwargs["max_new_tokens"] == 24  # mmeception_smoke.yaml's
    short = model._spec("P", json.dumps({**paper, "max_new_tokens": 8}), None)
    assert short.describer_kwargs["max_new_tokens"] == 8  # a shorter budget stands
