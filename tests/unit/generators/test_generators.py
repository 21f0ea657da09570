"""Tests for the text-to-image backends: no network, no downloaded weights."""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from PIL import Image

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lmms_genbench.generators import (
    GenerationFailure,
    Generator,
    build_generator,
    generator_names,
)

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")


# --------------------------------------------------------------------------
# registry


def test_generator_names():
    assert generator_names() == ["diffusers", "lmms", "openai", "smoke"]  # lmms: given as lmms:<model type>


def test_unknown_name_lists_allowed_and_given():
    with pytest.raises(ValueError) as info:
        build_generator("dalle")
    message = str(info.value)
    assert "name" in message and "'dalle'" in message
    for allowed in ("'diffusers'", "'openai'", "'smoke'"):
        assert allowed in message


def test_unknown_argument_is_named_with_the_allowed_ones():
    with pytest.raises(ValueError) as info:
        build_generator("openai", modle="dall-e-3")
    message = str(info.value)
    assert "'modle'" in message and "model" in message and "base_url" in message


@pytest.mark.parametrize(
    "name, kwargs, arg, allowed, got",
    [
        ("smoke", {"steps": "abc"}, "steps", "integer >= 1", "'abc'"),
        ("smoke", {"size": 60}, "size", "multiple of 8", "60"),
        ("smoke", {"batch_size": True}, "batch_size", "integer", "True"),
        ("openai", {"timeout": "nan"}, "timeout", "finite number", "'nan'"),
        ("openai", {"quality": "ultra"}, "quality", "'hd'", "'ultra'"),
        ("openai", {"size": "big"}, "size", "WIDTHxHEIGHT", "'big'"),
        ("openai", {"base_url": "ftp://x"}, "base_url", "http", "'ftp://x'"),
        (
            "diffusers",
            {"pretrained": "x", "dtype": "float8"},
            "dtype",
            "'bfloat16'",
            "'float8'",
        ),
        ("diffusers", {"device": "cpu"}, "pretrained", "local path", "None"),
        ("diffusers", {"pretrained": "x", "steps": 0}, "steps", ">= 1", "0"),
    ],
)
def test_bad_values_name_argument_allowed_and_given(name, kwargs, arg, allowed, got):
    with pytest.raises(ValueError) as info:
        build_generator(name, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{name} generator: {arg}:"), message
    assert allowed in message and got in message, message


def test_cli_style_values_are_coerced(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the openai backend checks it at construction
    gen = build_generator(
        "openai",
        batch_size="4",
        timeout=30,
        max_retries=2.0,
        backoff="0.5",
        quality="HD",
    )
    assert (gen.batch_size, gen.timeout, gen.max_retries, gen.backoff) == (
        4,
        30.0,
        2,
        0.5,
    )
    assert isinstance(gen.timeout, float) and isinstance(gen.max_retries, int)
    assert gen.quality == "hd"
    assert isinstance(gen, Generator)


def test_importing_the_package_loads_no_backend():
    code = (
        "import sys, lmms_genbench.generators; "
        "print(sorted(m for m in sys.modules if m in {'diffusers', "
        "'lmms_genbench.generators.diffusers_backend', "
        "'lmms_genbench.generators.openai_backend', 'lmms_genbench.generators.smoke'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------
# diffusers backend with a fake pipeline


class FakePipeline:
    """Records calls; colours each image by its generator's seed."""

    def __init__(self, bad=(), nsfw=(), black=(), dtype=None):
        if dtype is not None:
            self.dtype = dtype
        self.bad, self.nsfw, self.black = set(bad), set(nsfw), set(black)
        self.calls: list[tuple[list[str], dict]] = []
        self.progress: dict = {}

    def set_progress_bar_config(self, **kwargs):
        self.progress = kwargs

    def __call__(self, prompt, generator, **kwargs):
        self.calls.append(
            (list(prompt), dict(kwargs, seeds=[g.initial_seed() for g in generator]))
        )
        broken = [p for p in prompt if p in self.bad]
        if broken:
            raise RuntimeError(f"boom on {broken[0]}")
        images = [
            Image.new(
                "RGB",
                (8, 8),
                (0, 0, 0) if p in self.black else (g.initial_seed() % 250 + 1, 2, 3),
            )
            for p, g in zip(prompt, generator)
        ]
        return SimpleNamespace(
            images=images, nsfw_content_detected=[p in self.nsfw for p in prompt]
        )


def _diffusers(pipe, **kwargs):
    from lmms_genbench.generators.diffusers_backend import DiffusersGenerator

    return DiffusersGenerator(
        pretrained="org/model", pipeline=pipe, device="cpu", **kwargs
    )


def test_diffusers_passes_settings_and_per_prompt_seeds():
    pipe = FakePipeline()
    gen = _diffusers(
        pipe,
        steps=3,
        guidance=5.5,
        width=64,
        height=32,
        batch_size=2,
        negative_prompt="blurry",
    )
    out = gen.generate(["a", "b", "c"], [7, 8, 9])
    assert [im.getpixel((0, 0))[0] for im in out] == [8, 9, 10]
    assert pipe.progress == {"disable": True}
    assert [c[0] for c in pipe.calls] == [["a", "b"], ["c"]]
    first = pipe.calls[0][1]
    assert first["seeds"] == [7, 8]
    assert first["num_inference_steps"] == 3 and first["guidance_scale"] == 5.5
    assert (first["width"], first["height"]) == (64, 32)
    assert first["negative_prompt"] == ["blurry", "blurry"]


def test_diffusers_defaults_are_left_to_the_pipeline():
    pipe = FakePipeline()
    _diffusers(pipe).generate(["a"], [0])
    kwargs = pipe.calls[0][1]
    for key in (
        "num_inference_steps",
        "guidance_scale",
        "width",
        "height",
        "negative_prompt",
    ):
        assert key not in kwargs


def test_diffusers_isolates_the_failing_prompt():
    pipe = FakePipeline(bad={"bad"})
    gen = _diffusers(pipe, batch_size=4)
    out = gen.generate(["a", "bad", "c", "d", "e", "f"], [1, 2, 3, 4, 5, 6])
    assert isinstance(out[1], GenerationFailure)
    assert "RuntimeError" in out[1].reason and "boom on bad" in out[1].reason
    assert all(isinstance(out[i], Image.Image) for i in (0, 2, 3, 4, 5))
    assert [im.getpixel((0, 0))[0] for i, im in enumerate(out) if i != 1] == [
        2,
        4,
        5,
        6,
        7,
    ]
    # the failed chunk of 4 is retried prompt by prompt; the next chunk is not
    assert [c[0] for c in pipe.calls] == [
        ["a", "bad", "c", "d"],
        ["a"],
        ["bad"],
        ["c"],
        ["d"],
        ["e", "f"],
    ]


def test_diffusers_safety_flag_and_black_image_become_failures():
    pipe = FakePipeline(nsfw={"flagged"}, black={"dark"})
    out = _diffusers(pipe).generate(["ok", "flagged", "dark"], [0, 1, 2])
    assert isinstance(out[0], Image.Image)
    assert isinstance(out[1], GenerationFailure) and "NSFW" in out[1].reason
    assert isinstance(out[2], GenerationFailure) and "all-black" in out[2].reason


def test_diffusers_name_is_stable_and_tracks_output_settings():
    base = _diffusers(FakePipeline(), steps=4).name
    assert base == _diffusers(FakePipeline(), steps=4, batch_size=9).name
    assert base.startswith("diffusers-org-model-") and len(base.rsplit("-", 1)[1]) == 8
    others = {
        _diffusers(FakePipeline(), steps=5).name,
        _diffusers(FakePipeline(), steps=4, guidance=2).name,
        _diffusers(FakePipeline(), steps=4, width=64).name,
        _diffusers(FakePipeline(), steps=4, negative_prompt="x").name,
        _diffusers(FakePipeline(), steps=4, dtype="float16").name,
    }
    assert base not in others and len(others) == 5


def test_diffusers_injected_pipeline_dtype_is_reported_not_contradicted():
    assert _diffusers(FakePipeline(dtype=torch.bfloat16)).dtype == "bfloat16"
    with pytest.raises(
        ValueError, match="dtype: expected 'auto' or .*'bfloat16'; got 'float16'"
    ):
        _diffusers(FakePipeline(dtype=torch.bfloat16), dtype="float16")


def test_diffusers_seed_count_must_match():
    with pytest.raises(ValueError, match="one seed per prompt"):
        _diffusers(FakePipeline()).generate(["a", "b"], [1])


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_missing_cuda_is_an_error_not_a_cpu_fallback():
    from lmms_genbench.generators.diffusers_backend import DiffusersGenerator

    with pytest.raises(RuntimeError, match="CUDA is not available"):
        DiffusersGenerator(
            pretrained="org/model", pipeline=FakePipeline(), device="cuda"
        )
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        build_generator("smoke", device="cuda")


# --------------------------------------------------------------------------
# smoke backend


@pytest.fixture(scope="module")
def smoke():
    return build_generator("smoke")


PROMPTS = [f"a photo of {n} red cats" for n in range(8)]


def _same(a: Image.Image, b: Image.Image) -> bool:
    return a.tobytes() == b.tobytes()


def test_smoke_batch_shape_and_speed(smoke):
    smoke.generate(PROMPTS[:1], [0])  # first call pays one-off kernel setup
    start = time.perf_counter()
    out = smoke.generate(PROMPTS, list(range(8)))
    elapsed = time.perf_counter() - start
    assert len(out) == 8
    assert all(
        isinstance(im, Image.Image) and im.size == (64, 64) and im.mode == "RGB"
        for im in out
    )
    assert elapsed < 30, elapsed  # generous: CI machines are shared


def test_smoke_is_deterministic(smoke):
    first = smoke.generate(PROMPTS[:2], [1, 2])
    again = smoke.generate(PROMPTS[:2], [1, 2])
    rebuilt = build_generator("smoke", seed=0).generate(PROMPTS[:2], [1, 2])
    assert all(_same(a, b) for a, b in zip(first, again))
    assert all(_same(a, b) for a, b in zip(first, rebuilt))
    assert smoke.name == build_generator("smoke").name == "smoke-s0-64px-2st-g1-t512-cpu"


def test_smoke_depends_on_seed_and_weights(smoke):
    base = smoke.generate(PROMPTS[:1], [1])[0]
    assert not _same(base, smoke.generate(PROMPTS[:1], [2])[0])
    other = build_generator("smoke", seed=1)
    assert other.name != smoke.name
    assert not _same(base, other.generate(PROMPTS[:1], [1])[0])


def test_smoke_does_not_disturb_the_global_rng():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_generator("smoke", seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_smoke_tokenizer_is_local_and_clip_shaped():
    from lmms_genbench.smoke.diffusion import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    ids = tok(
        ["the cat"], padding="max_length", max_length=tok.model_max_length
    ).input_ids[0]
    # wider than CLIP's 77 on purpose: descriptions must reach the smoke generator
    assert len(ids) == 512 == tok.model_max_length
    assert ids[0] == tok.bos_token_id and ids[3] == tok.eos_token_id
    assert tok.convert_ids_to_tokens(ids[1:3]) == ["the</w>", "cat</w>"]


# --------------------------------------------------------------------------
# openai backend with httpx.MockTransport

FAKE_KEY = "sk-test-DO-NOT-LEAK-0123456789abcdef"


def _png_b64(colour=(10, 20, 30), size=(16, 16)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _ok(colour=(10, 20, 30)) -> httpx.Response:
    return httpx.Response(200, json={"data": [{"b64_json": _png_b64(colour)}]})


def _error(status, message, code=None, headers=None) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"message": message, "code": code}}, headers=headers
    )


class Script:
    """An httpx.MockTransport handler answering from a list, recording requests."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    return FAKE_KEY


def _openai(handler, **kwargs):
    from lmms_genbench.generators.openai_backend import OpenAIImageGenerator

    kwargs.setdefault("backoff", 0.001)
    gen = OpenAIImageGenerator(transport=httpx.MockTransport(handler), **kwargs)
    gen.sleeps = []
    gen._sleep = gen.sleeps.append  # record waits instead of sleeping
    return gen


def test_openai_success_dalle3_request(api_key):
    script = Script(_ok())
    out = _openai(script).generate(["a red cube"], [42])
    assert isinstance(out[0], Image.Image) and out[0].size == (16, 16)
    request = script.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/images/generations"
    assert request.headers["authorization"] == f"Bearer {api_key}"
    body = json.loads(request.content)
    assert body == {
        "model": "dall-e-3",
        "prompt": "a red cube",
        "n": 1,
        "size": "1024x1024",
        "quality": "standard",
        "response_format": "b64_json",
    }


def test_openai_gpt_image_maps_quality_and_omits_response_format(api_key):
    script = Script(_ok())
    gen = _openai(
        script,
        model="gpt-image-1",
        quality="standard",
        base_url="http://local:8000/v1/",
    )
    assert isinstance(gen.generate(["x"], [0])[0], Image.Image)
    body = json.loads(script.requests[0].content)
    assert body["quality"] == "medium" and "response_format" not in body
    assert str(script.requests[0].url) == "http://local:8000/v1/images/generations"


def test_openai_keeps_order_under_concurrency(api_key):
    def answer(request):
        n = int(json.loads(request.content)["prompt"])
        time.sleep(0.01 * (8 - n))  # later prompts finish first
        return _ok((n, 0, 0))

    out = _openai(Script(answer), batch_size=4).generate(
        [str(n) for n in range(8)], list(range(8))
    )
    assert [im.getpixel((0, 0))[0] for im in out] == list(range(8))


def test_openai_retries_429_honouring_retry_after(api_key):
    script = Script(
        _error(429, "slow down", "rate_limit_exceeded", {"Retry-After": "3"}), _ok()
    )
    gen = _openai(script)
    out = gen.generate(["x"], [0])
    assert isinstance(out[0], Image.Image)
    assert len(script.requests) == 2
    assert len(gen.sleeps) == 1 and 3.0 <= gen.sleeps[0] < 3.01


def test_openai_5xx_retries_exhausted_become_a_failure(api_key):
    script = Script(_error(503, "overloaded"))
    gen = _openai(script, max_retries=3, backoff=1.0)
    out = gen.generate(["x"], [0])
    assert isinstance(out[0], GenerationFailure)
    assert "HTTP 503" in out[0].reason and "overloaded" in out[0].reason
    assert "4 attempts" in out[0].reason
    assert len(script.requests) == 4
    # exponential: about 1, 2, 4 seconds, each within its +-50% jitter band
    assert [
        0.5 <= gen.sleeps[0] <= 1.5,
        1 <= gen.sleeps[1] <= 3,
        2 <= gen.sleeps[2] <= 6,
    ] == [True] * 3


def test_openai_content_policy_400_fails_without_retry(api_key):
    script = Script(
        _error(
            400,
            "Your request was rejected by our safety system.",
            "content_policy_violation",
        ),
        _ok(),
    )
    gen = _openai(script)
    out = gen.generate(["bad", "good"], [0, 1])
    failure = out[0]
    assert isinstance(failure, GenerationFailure)
    assert "HTTP 400" in failure.reason and "safety system" in failure.reason
    assert "content_policy_violation" in failure.reason
    assert isinstance(out[1], Image.Image)
    assert len(script.requests) == 2 and gen.sleeps == []


def test_openai_timeouts_are_retried(api_key):
    timeout = httpx.ReadTimeout("read timed out")
    script = Script(timeout, _ok())
    gen = _openai(script, batch_size=1)
    assert isinstance(gen.generate(["x"], [0])[0], Image.Image)

    script = Script(timeout)
    gen = _openai(script, max_retries=2, timeout=7)
    out = gen.generate(["x"], [0])[0]
    assert isinstance(out, GenerationFailure)
    assert "timed out after 7s" in out.reason and "3 attempts" in out.reason
    assert len(script.requests) == 3


def test_openai_auth_error_raises(api_key):
    from lmms_genbench.generators.openai_backend import OpenAIConfigError

    with pytest.raises(OpenAIConfigError, match="HTTP 401"):
        _openai(
            Script(_error(401, "Incorrect API key provided", "invalid_api_key"))
        ).generate(["x"], [0])


def test_openai_missing_key_names_the_variable(monkeypatch):
    from lmms_genbench.generators.openai_backend import MissingAPIKeyError

    monkeypatch.delenv("MY_IMAGES_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="MY_IMAGES_KEY") as info:  # at load, before any doc
        _openai(Script(_ok()), api_key_env="MY_IMAGES_KEY")
    assert "generator.api_key_env" in info.value.fix
    monkeypatch.setenv("MY_IMAGES_KEY", "sk-test")
    gen = _openai(Script(_ok()), api_key_env="MY_IMAGES_KEY")
    monkeypatch.delenv("MY_IMAGES_KEY")  # read again at every call
    with pytest.raises(MissingAPIKeyError, match="MY_IMAGES_KEY"):
        gen.generate(["x"], [0])


def test_openai_key_never_leaks(api_key, caplog):
    from lmms_genbench.generators.openai_backend import OpenAIConfigError

    caplog.set_level(logging.DEBUG)
    # A hostile server echoes the key back in every error it can.
    echo = f"bad key {api_key} echoed"
    script = Script(
        _error(500, echo),
        _error(400, echo),
        httpx.ConnectError(f"cannot connect with {api_key}"),
        httpx.ConnectError(f"cannot connect with {api_key}"),
    )
    gen = _openai(script, max_retries=1, batch_size=1)
    out = gen.generate(["a", "b"], [0, 1])
    with pytest.raises(OpenAIConfigError) as info:
        _openai(Script(_error(401, echo))).generate(["x"], [0])

    texts = [repr(gen), gen.name, str(vars(gen)), str(info.value), caplog.text]
    texts += [r.reason for r in out if isinstance(r, GenerationFailure)]
    assert len(out) == 2 and all(isinstance(r, GenerationFailure) for r in out)
    assert "[redacted]" in out[0].reason + out[1].reason
    assert caplog.text  # the retry was logged ...
    for text in texts:
        assert api_key not in text  # ... but never the key


def test_smoke_drawings_depend_on_the_description_after_the_prompt_prefix():
    from lmms_genbench.generators.smoke import SmokeGenerator

    gen = SmokeGenerator(size=32)
    prefix = "Generate an image that fully and precisely reflects this description: "
    shared = prefix + "a wide photo taken outdoors, in which we see "  # past 77 tokens of this vocabulary
    a, b = gen.generate([shared + "a red square on grass", shared + "a blue cat under the moon"], [0, 0])
    import numpy as np

    assert np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).max() > 0
