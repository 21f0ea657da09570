"""The local test hub (tests/support/localhub) met by fresh client processes:
``datasets.load_dataset`` and transformers' ``from_pretrained`` meet the same failures as on the
Hub (the in-process checks: tests/unit/test_localhub.py)."""

import json
import os
import subprocess
import sys

import pytest

from tests.support.localhub.server import ACCEPTED, NOT_ACCEPTED, LocalHubServer

_DATASETS_CLIENT = """
import json, sys
import datasets
out = {}
# failures first: once a split is cached, datasets reuses it without fetching files
for name, token, revision in [("no_token", False, None), ("not_accepted", "%(not_accepted)s", None),
                              ("revision", "%(accepted)s", "v9"), ("ok", "%(accepted)s", None)]:
    try:
        ds = datasets.load_dataset("org/gated", split="test", token=token, revision=revision)
        out[name] = ds.num_rows
    except Exception as exc:
        chain, e = [], exc
        while e is not None:
            chain.append(type(e).__name__ + ": " + str(e)[:200])
            e = e.__cause__ or e.__context__
        out[name] = chain
print(json.dumps(out))
"""


# a fresh process importing datasets: about 4 s
def test_load_dataset_meets_the_same_failures(tmp_path):
    """datasets' own loader, in a fresh process with HF_ENDPOINT set, against a gated parquet repo."""
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "repo"
    (folder / "data").mkdir(parents=True)
    datasets.Dataset.from_dict({"x": [1, 2, 3]}).to_parquet(str(folder / "data" / "test-00000-of-00001.parquet"))
    with LocalHubServer() as server:
        server.add("org/gated", folder, repo_type="dataset", gated=True)
        env = {**os.environ, **server.env(hf_home=tmp_path / "hf", token=None)}
        env.pop("HF_TOKEN", None)
        code = _DATASETS_CLIENT % {"accepted": ACCEPTED, "not_accepted": NOT_ACCEPTED}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ok"] == 3
    joined = {k: " | ".join(v) for k, v in out.items() if k != "ok"}
    assert "gated" in joined["no_token"] and "authenticated" in joined["no_token"], joined["no_token"]
    assert "gated" in joined["not_accepted"], joined["not_accepted"]
    assert "v9" in joined["revision"], joined["revision"]


_TRANSFORMERS_CLIENT = """
import json
import transformers
out = {}
for name, repo, revision, token in [("revision", "org/model", "v9", False), ("gated", "org/gated-model", None, False),
                                    ("not_accepted", "org/gated-model", None, "%(not_accepted)s"),
                                    ("sha", "org/model", "%(sha)s", False)]:
    try:
        out[name] = transformers.AutoConfig.from_pretrained(repo, revision=revision, token=token).model_type
    except Exception as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)[:300]
print(json.dumps(out))
"""


# a fresh process importing transformers: a few seconds
def test_from_pretrained_meets_the_same_failures(tmp_path):
    """transformers' own loader in a fresh process: a missing revision, a gated model without a
    token and without accepted terms, and a commit sha."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "vit"}))
    with LocalHubServer() as server:
        server.add("org/model", folder)
        server.add("org/gated-model", folder, gated=True)
        env = {**os.environ, **server.env(hf_home=tmp_path / "hf", token=None)}
        env.pop("HF_TOKEN", None)
        code = _TRANSFORMERS_CLIENT % {"not_accepted": NOT_ACCEPTED, "sha": server.sha("org/model")}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["sha"] == "vit"
    assert "v9" in out["revision"] and "OSError" in out["revision"], out["revision"]
    assert "gated" in out["gated"] and "401" in out["gated"], out["gated"]
    assert "gated" in out["not_accepted"] and "403" in out["not_accepted"], out["not_accepted"]
