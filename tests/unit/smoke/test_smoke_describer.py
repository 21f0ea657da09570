"""The tiny random LLaVA and Qwen2-VL load in lmms-eval's real model classes, offline, on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may touch the hub

skimage_data = pytest.importorskip("skimage.data")
from PIL import Image

from lmms_genbench.smoke import llava as smoke_describer
from lmms_genbench.smoke.llava import (
    QWEN2_VL_MAX_PIXELS,
    QWEN2_VL_MIN_PIXELS,
    build_tiny_llava,
    build_tiny_qwen2_vl,
    tiny_llava_path,
    tiny_qwen2_vl_path,
)
from lmms_genbench.smoke.checkpoints import is_complete
from lmms_genbench.smoke.qwen2_vl import qwen2_vl_build_key
from lmms_genbench.smoke.tokenizers import read_words
from tests.support.threads import single_thread

REPO_ROOT = Path(__file__).resolve().parents[3]
PROMPT = "Describe the image in detail."
TASK, SPLIT = "smoke", "test"
# lmms-eval on transformers 5 needs an explicit device_map: its default "" is rejected.
CPU_ARGS = {"device": "cpu", "dtype": "float32", "batch_size": 1, "device_map": "cpu"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llava(tmp_path_factory.mktemp("smoke") / "tiny-llava", seed=0)


@pytest.fixture(scope="module")
def docs() -> dict[int, dict]:
    return {
        0: {"image": Image.fromarray(skimage_data.astronaut())},
        1: {"image": Image.fromarray(skimage_data.coffee())},
    }


def _gen_kwargs(max_new_tokens: int = 32, until: list[str] | None = None) -> dict:
    # A fresh dict per request: the models pop "until" and add "image_sizes".
    return {
        "max_new_tokens": max_new_tokens,
        "temperature": 0,
        "do_sample": False,
        "until": until or [],
    }


def _messages(doc: dict) -> list[dict]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "image", "url": doc["image"]},
                {"type": "text", "text": PROMPT},
            ],
        }
    ]


def _visuals(doc: dict) -> list:
    return [doc["image"]]


def _load(model_dir: Path, docs: dict, simple: bool):
    from lmms_eval.models import get_model

    cls = get_model("llava_hf", force_simple=simple)
    lm = cls(pretrained=str(model_dir), **CPU_ARGS)
    lm.task_dict = {TASK: {SPLIT: docs}}  # normally set by the evaluator
    return lm


def _generate(lm, simple: bool, doc_ids: list[int], **gen) -> list:
    from lmms_eval.api.instance import Instance

    requests = []
    for doc_id in doc_ids:
        if simple:
            args = (PROMPT, _gen_kwargs(**gen), _visuals, doc_id, TASK, SPLIT)
        else:
            args = (PROMPT, _messages, _gen_kwargs(**gen), doc_id, TASK, SPLIT)
        meta = {"task": TASK, "doc_id": doc_id, "repeats": 1}
        requests.append(
            Instance(
                request_type="generate_until", arguments=args, idx=0, metadata=meta
            )
        )
    return lm.generate_until(requests)


@pytest.fixture(scope="module")
def one_thread():
    # Tiny ops on a shared 2-core box: OpenMP threads mostly spin and contend (10x slower).
    with single_thread():
        yield


@pytest.fixture(scope="module")
def outputs(model_dir: Path, docs: dict, one_thread: None) -> dict[str, list]:
    """Texts/results from both lmms-eval classes, each run twice over both images."""
    out = {}
    for name, simple in (("simple", True), ("chat", False)):
        lm = _load(model_dir, docs, simple)
        out[name] = _generate(lm, simple, [0, 1])
        out[name + "_again"] = _generate(lm, simple, [0, 1])
        # The harness ignores "until" (no truncation), so a non-empty list is merely accepted.
        out[name + "_until"] = _generate(lm, simple, [0], until=["the", "."])
    return out


def _text(result) -> str:
    return result if isinstance(result, str) else result.text


def _assert_model_and_processor(folder: Path, model_type: str) -> None:
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "processor_config.json"} <= names
    assert json.loads((folder / "config.json").read_text())["model_type"] == model_type


def test_folder_has_model_and_processor(model_dir: Path) -> None:
    _assert_model_and_processor(model_dir, "llava")


@pytest.mark.parametrize("name", ["simple", "chat"])
def test_generates_nonempty_deterministic_word_salad(outputs: dict, name: str) -> None:
    texts = [_text(r) for r in outputs[name]]
    assert all(t.strip() for t in texts), texts
    assert texts == [_text(r) for r in outputs[name + "_again"]]
    assert texts[0] != texts[1], (
        "astronaut and coffee should get different descriptions"
    )
    words = set(read_words())
    for text in texts:
        tokens = text.replace(".", " ").replace(",", " ").split()
        assert sum(t in words for t in tokens) >= 0.8 * len(tokens), text
    assert _text(outputs[name + "_until"][0]) == texts[0]


def test_chat_runs_to_max_new_tokens_and_matches_simple(outputs: dict) -> None:
    # EOS is suppressed, so every description has exactly max_new_tokens tokens.
    assert [r.token_counts.output_tokens for r in outputs["chat"]] == [32, 32]
    # Both classes render the same vicuna prompt, so greedy output is identical.
    assert [_text(r) for r in outputs["chat"]] == outputs["simple"]


def test_same_seed_same_weights_other_seed_differs(
    model_dir: Path, tmp_path: Path
) -> None:
    again = build_tiny_llava(tmp_path / "again", seed=0)
    other = build_tiny_llava(tmp_path / "other", seed=1)
    weights = (model_dir / "model.safetensors").read_bytes()
    assert (again / "model.safetensors").read_bytes() == weights
    assert (other / "model.safetensors").read_bytes() != weights


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_rebuild_in_place_is_atomic_and_valid(tmp_path: Path) -> None:
    dest = tmp_path / "m"
    build_tiny_llava(dest)
    (dest / "stray.txt").write_text("from an older build")
    smoke_describer_marker = dest / "genbench_smoke.json"
    smoke_describer_marker.write_text(json.dumps({"key": "old", "seed": 0}))
    assert build_tiny_llava(dest) == dest.absolute()
    assert not (dest / "stray.txt").exists()  # stale build was replaced, not merged
    assert is_complete(dest, 0, "llava", smoke_describer.build_key())
    assert _leftovers(tmp_path) == []


def test_tiny_llava_path_caches_and_rebuilds_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "root"))
    path = tiny_llava_path(seed=3)
    key = smoke_describer.build_key()[:8]
    assert path == (tmp_path / "root" / "smoke" / f"tiny-llava-s3-{key}").absolute()
    marker = path / "genbench_smoke.json"
    stamp = marker.stat().st_mtime_ns
    assert (
        tiny_llava_path(seed=3) == path and marker.stat().st_mtime_ns == stamp
    )  # reused
    # A different builder version builds a new checkpoint under a new name, so
    # artifact-store keys (which include that name) change with it.
    monkeypatch.setattr(smoke_describer, "build_key", lambda: "changed-builder")
    rebuilt = tiny_llava_path(seed=3)
    assert rebuilt != path and rebuilt.name == "tiny-llava-s3-changed-"
    assert json.loads((rebuilt / "genbench_smoke.json").read_text())["key"] == "changed-builder"
    # An explicit cache_dir wins over the environment variable.
    explicit = tiny_llava_path(cache_dir=tmp_path / "explicit", seed=3)
    assert explicit == (tmp_path / "explicit" / "smoke" / "tiny-llava-s3-changed-").absolute()


def test_concurrent_builds_leave_one_valid_folder(tmp_path: Path) -> None:
    # Two processes race to build the same cache entry, like two accelerate ranks.
    code = (
        "import sys; from lmms_genbench.smoke.llava import tiny_llava_path; "
        "print(tiny_llava_path(cache_dir=sys.argv[1], seed=0))"
    )
    pythonpath = os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    paths = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    dest = tmp_path / "smoke" / f"tiny-llava-s0-{smoke_describer.build_key()[:8]}"
    assert paths == [str(dest.absolute())] * 2
    assert is_complete(dest, 0, "llava", smoke_describer.build_key())
    assert _leftovers(dest.parent) == []


# ---------------------------------------------------------------- Qwen2-VL

# lmms-eval's qwen2_vl defaults to CUDA and to up to 768 tokens an image; it takes no dtype.
QWEN_CPU_ARGS = {
    "device": "cpu",
    "device_map": "cpu",
    "min_pixels": QWEN2_VL_MIN_PIXELS,
    "max_pixels": QWEN2_VL_MAX_PIXELS,
}
QWEN_IMAGES = ("astronaut", "coffee", "chelsea", "rocket")


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen2_vl(tmp_path_factory.mktemp("smoke") / "tiny-qwen2-vl", seed=0)


def _load_qwen(qwen_dir: Path, batch_size: int):
    from lmms_eval.models import get_model

    cls = get_model("qwen2_vl")
    # Only a simple class is registered for qwen2_vl, so the default lookup gives it.
    assert cls is get_model("qwen2_vl", force_simple=True)
    assert cls.is_simple
    return cls(pretrained=str(qwen_dir), batch_size=batch_size, **QWEN_CPU_ARGS)


def _count_generate(lm) -> list[tuple[int, int]]:
    """Record (batch rows, new tokens) for every ``model.generate`` call of ``lm``."""
    model = lm.model
    original = model.generate
    calls: list[tuple[int, int]] = []

    def generate(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append((out.shape[0], out.shape[1] - kwargs["input_ids"].shape[1]))
        return out

    model.generate = generate  # instance attribute: shadows the method for this model only
    return calls


@pytest.fixture(scope="module")
def qwen_outputs(qwen_dir: Path, one_thread: None) -> dict:
    """Descriptions of four different images through lmms-eval's qwen2_vl class."""
    from lmms_genbench.engine.describer import LmmsDescriber

    images = [Image.fromarray(getattr(skimage_data, name)()) for name in QWEN_IMAGES]
    gen_kwargs = {"max_new_tokens": 32, "temperature": 0}
    out: dict = {}
    for batch_size in (4, 1):
        lm = _load_qwen(qwen_dir, batch_size)
        calls = _count_generate(lm)
        describer = LmmsDescriber(lm, f"tiny-qwen2-vl-bs{batch_size}")
        out[batch_size] = describer.describe(images, PROMPT, gen_kwargs)
        out[f"{batch_size}_calls"] = list(calls)
        out[f"{batch_size}_again"] = describer.describe(images, PROMPT, gen_kwargs)
    return out


def test_qwen_folder_has_model_and_processor(qwen_dir: Path) -> None:
    _assert_model_and_processor(qwen_dir, "qwen2_vl")
    assert is_complete(qwen_dir, 0, "qwen2_vl", qwen2_vl_build_key())
    assert not is_complete(qwen_dir, 0, "llava", qwen2_vl_build_key())


def test_qwen_batched_describe_nonempty_deterministic(qwen_outputs: dict) -> None:
    texts = qwen_outputs[4]
    assert all(isinstance(t, str) and t.strip() for t in texts), [
        getattr(t, "reason", t) for t in texts
    ]
    assert qwen_outputs["4_again"] == texts
    assert len(set(texts)) == len(QWEN_IMAGES), "different images, different descriptions"
    words = set(read_words())
    for text in texts:
        tokens = text.replace(".", " ").replace(",", " ").split()
        assert sum(t in words for t in tokens) >= 0.8 * len(tokens), text


def test_qwen_generates_once_per_batch_to_max_new_tokens(qwen_outputs: dict) -> None:
    # Real batching: one generate for all four images; EOS is suppressed, so every
    # row runs to max_new_tokens.
    assert qwen_outputs["4_calls"] == [(4, 32)]
    assert qwen_outputs["1_calls"] == [(1, 32)] * 4


def test_qwen_batched_matches_unbatched(qwen_outputs: dict) -> None:
    # The images get different numbers of image tokens, so the batch is left-padded;
    # greedy output must not depend on that padding.
    assert qwen_outputs[1] == qwen_outputs[4]
    assert qwen_outputs["1_again"] == qwen_outputs[1]


def test_qwen_same_seed_same_files_other_seed_differs(qwen_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_qwen2_vl(tmp_path / "again", seed=0)
    other = build_tiny_qwen2_vl(tmp_path / "other", seed=1)
    for path in sorted(qwen_dir.iterdir()):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name
    weights = (qwen_dir / "model.safetensors").read_bytes()
    assert (other / "model.safetensors").read_bytes() != weights


def test_tiny_qwen2_vl_path_caches_beside_llava(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "root"))
    key = qwen2_vl_build_key()[:8]
    path = tiny_qwen2_vl_path(seed=2)
    assert path == (tmp_path / "root" / "smoke" / f"tiny-qwen2-vl-s2-{key}").absolute()
    marker = path / "genbench_smoke.json"
    stamp = marker.stat().st_mtime_ns
    assert tiny_qwen2_vl_path(seed=2) == path and marker.stat().st_mtime_ns == stamp
    assert json.loads(marker.read_text())["model"] == "qwen2_vl"
    explicit = tiny_qwen2_vl_path(cache_dir=tmp_path / "explicit", seed=2)
    assert explicit == (tmp_path / "explicit" / "smoke" / f"tiny-qwen2-vl-s2-{key}").absolute()
    # A LLaVA build at a Qwen destination is foreign content: replaced, not reused.
    foreign = tmp_path / "foreign"
    build_tiny_llava(foreign, seed=0)
    assert build_tiny_qwen2_vl(foreign, seed=0) == foreign.absolute()
    assert json.loads((foreign / "config.json").read_text())["model_type"] == "qwen2_vl"
    assert _leftovers(tmp_path) == []


def test_the_vllm_qwen2_vl_has_head_dim_32_and_describes_with_transformers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    from lmms_genbench.engine.describer import LmmsDescriber
    from lmms_genbench.smoke.llava import VLLM_HEAD_DIM

    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "root"))
    path = tiny_qwen2_vl_path(seed=0, head_dim=VLLM_HEAD_DIM)
    key = qwen2_vl_build_key()[:8]
    assert path == (tmp_path / "root" / "smoke" / f"tiny-qwen2-vl-h32-s0-{key}").absolute()
    assert json.loads((path / "genbench_smoke.json").read_text())["model"] == "qwen2_vl_h32"
    text = json.loads((path / "config.json").read_text())["text_config"]
    # vLLM's CPU attention takes head sizes 32, 64, 80, ... (not 16)
    assert text["hidden_size"] // text["num_attention_heads"] == VLLM_HEAD_DIM == 32
    assert sum(text["rope_parameters"]["mrope_section"]) == VLLM_HEAD_DIM // 2
    # the original head size keeps its own folder: one never stands in for the other
    assert tiny_qwen2_vl_path(seed=0) == (tmp_path / "root" / "smoke" / f"tiny-qwen2-vl-s0-{key}").absolute()
    lm = _load_qwen(path, batch_size=2)
    calls = _count_generate(lm)
    images = [Image.fromarray(getattr(skimage_data, name)()) for name in QWEN_IMAGES[:2]]
    texts = LmmsDescriber(lm, "h32").describe(images, PROMPT, {"max_new_tokens": 8, "temperature": 0})
    assert all(isinstance(t, str) and t.strip() for t in texts) and calls == [(2, 8)]
    with pytest.raises(ValueError, match=r"^head_dim: expected one of \[16, 32\]; got 24"):
        tiny_qwen2_vl_path(seed=0, head_dim=24)
