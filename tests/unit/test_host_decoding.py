"""The task's decoding settings hold through every describer class we document.

Each fake below answers with the rule its lmms-eval 0.7.3 class applies (file and
lines named), generating exactly as many words as the class would let the model
generate; the real vllm and openai classes then run with stubbed backends to pin
those rules to the installed source (no vLLM, no network).
"""

from __future__ import annotations

import pytest
from lmms_eval.api.instance import GenerationResult
from PIL import Image

from lmms_genbench import host

STOP = "STOP"


def _words(n: int) -> str:
    """What a model says in ``n`` tokens: a stop word at token 5 (when it gets that far)."""
    return " ".join(STOP if i == 5 else f"w{i}" for i in range(n))


class _Fake:
    """Records what each request finally asked the backend for."""

    is_simple = False

    def __init__(self):
        self.task_dict = {}
        self.sent: list[dict] = []

    def generate_until(self, requests):
        out = []
        for r in requests:
            kwargs = r.args[1] if self.is_simple else r.args[2]
            length, temperature = self.rule(kwargs)
            self.sent.append({"max_new_tokens": length, "temperature": temperature})
            out.append(self.answer(_words(length), kwargs))
        return out

    def answer(self, text, kwargs):
        return GenerationResult(text=text)


class LlavaHfChat(_Fake):
    """chat/llava_hf.py 75-94: default 1024 tokens and temperature 0; ``until`` ignored."""

    def rule(self, kwargs):
        kwargs.setdefault("max_new_tokens", 1024)
        kwargs.setdefault("temperature", 0)
        return kwargs["max_new_tokens"], kwargs["temperature"]


class Qwen2VlSimple(_Fake):
    """simple/qwen2_vl.py 229-240, 398-454: default 128 and 0; cuts at ``until`` and strips."""

    is_simple = True

    def rule(self, kwargs):
        self.until = kwargs.pop("until", [])
        merged = {"max_new_tokens": 128, "temperature": 0.0, **kwargs}
        return merged["max_new_tokens"], merged["temperature"]

    def answer(self, text, kwargs):
        for term in self.until:
            if term and term in text:
                text = text[: text.index(term)]
        return text.strip()


class Qwen25VlChat(_Fake):
    """chat/qwen2_5_vl.py 120-128: default 128 and 0 merged under the request's; ``until`` ignored."""

    def rule(self, kwargs):
        merged = {"max_new_tokens": 128, "temperature": 0.0, **kwargs}
        return merged["max_new_tokens"], merged["temperature"]


class VllmChat(_Fake):
    """chat/vllm.py 65-75 with simple/vllm.py 333-341: max(request's, own 4096);
    temperature default 0; ``until`` ignored."""

    max_new_tokens = 4096

    def _select_max_new_tokens(self, request_max_new_tokens):
        if request_max_new_tokens is None:
            return self.max_new_tokens
        return max(int(request_max_new_tokens), self.max_new_tokens)

    def rule(self, kwargs):
        kwargs = dict(kwargs)
        kwargs["max_new_tokens"] = self._select_max_new_tokens(kwargs.get("max_new_tokens"))
        kwargs.setdefault("temperature", 0)
        return kwargs["max_new_tokens"], kwargs["temperature"]


class OpenAiChat(_Fake):
    """chat/openai.py 193-207 with simple/openai.py 66: default 1024 and 0; ``until`` ignored."""

    def rule(self, kwargs):
        return kwargs.get("max_new_tokens", 1024), kwargs.get("temperature", 0)


CLASSES = [LlavaHfChat, Qwen2VlSimple, Qwen25VlChat, VllmChat, OpenAiChat]
IMAGE = Image.new("RGB", (8, 8), (1, 2, 3))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("length", [3, 24])
def test_the_task_length_and_temperature_reach_the_backend(cls, length):
    lm = cls()
    kwargs = {"max_new_tokens": length, "temperature": 0.7}
    out = host.generate(lm, [("Describe.", kwargs, [IMAGE])] * 2)
    assert lm.sent == [{"max_new_tokens": length, "temperature": 0.7}] * 2
    assert [len(text.split()) for text in out] == [length] * 2
    assert kwargs == {"max_new_tokens": length, "temperature": 0.7}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("until", [STOP, [STOP], ["never", STOP]])
def test_answers_end_before_the_first_stop_string(cls, until):
    out = host.generate(cls(), [("Describe.", {"max_new_tokens": 24, "until": until}, [IMAGE])])
    assert out[0].split() == ["w0", "w1", "w2", "w3", "w4"]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_without_settings_each_class_keeps_its_own_defaults(cls):
    lm = cls()
    host.generate(lm, [("Describe.", None, [IMAGE])])
    assert lm.sent == [{"max_new_tokens": {LlavaHfChat: 1024, Qwen2VlSimple: 128, Qwen25VlChat: 128, VllmChat: 4096,
                                           OpenAiChat: 1024}[cls], "temperature": 0}]


def test_the_vllm_ceiling_is_per_request_and_put_back_after_the_call():
    lm = VllmChat()
    host.generate(lm, [("a", {"max_new_tokens": 7}, []), ("b", {"max_new_tokens": 3}, []), ("c", {}, [])])
    assert [s["max_new_tokens"] for s in lm.sent] == [7, 3, 4096]
    assert lm.max_new_tokens == 4096


def test_a_bad_length_is_named_before_anything_is_sent():
    lm = VllmChat()
    with pytest.raises(ValueError, match=r"^items\[1\] gen_kwargs max_new_tokens: expected an integer >= 1; got 0"):
        host.generate(lm, [("a", {"max_new_tokens": 3}, []), ("b", {"max_new_tokens": 0}, [])])
    with pytest.raises(TypeError, match=r"^items\[0\] gen_kwargs until: expected a string or a list of strings"):
        host.generate(lm, [("a", {"until": 3}, [])])
    assert lm.sent == [] and lm.max_new_tokens == 4096


def test_a_changed_length_rule_is_refused():
    class MinRule(VllmChat):
        def _select_max_new_tokens(self, request_max_new_tokens):
            return min(int(request_max_new_tokens), 16)

    with pytest.raises(RuntimeError, match=r"MinRule._select_max_new_tokens chose \[16\] for the requested \[24\]"):
        host.generate(MinRule(), [("a", {"max_new_tokens": 24}, [])])


# -- the installed classes, with stubbed backends ------------------------------------


class _Output:
    def __init__(self, text):
        self.outputs = [type("Completion", (), {"text": text})()]


class _VllmClient:
    """Stands in for ``vllm.LLM``: records each prompt's messages and parameters."""

    def __init__(self):
        self.calls = []

    def chat(self, sampling_params, messages, chat_template=None):
        self.calls.append((sampling_params, messages))
        return [_Output(_words(p["max_tokens"])) for p in sampling_params]


def _real_vllm_chat(monkeypatch, batch_size=8):
    import lmms_eval.models.chat.vllm as chat_vllm
    from lmms_eval.api.model import lmms

    # the class builds vllm.SamplingParams(**params); without vLLM, keep the dict
    monkeypatch.setattr(chat_vllm, "SamplingParams", dict)
    lm = chat_vllm.VLLM.__new__(chat_vllm.VLLM)  # everything __init__ sets but the engine
    lmms.__init__(lm)
    lm.max_new_tokens, lm.batch_size_per_gpu, lm.disable_log_stats = 4096, batch_size, True
    lm.chat_template, lm._tp_world_size, lm._tp_group_cpu = None, 1, None
    lm.max_pixels, lm.min_image_pixels, lm.max_frame_num = 1605632, 28, 768
    lm.fps, lm.nframes, lm.is_qwen3_vl = None, 32, False
    lm.client = _VllmClient()
    return lm


def test_the_real_vllm_chat_class_takes_the_larger_length_without_the_host(monkeypatch):
    from lmms_eval.api.instance import Instance

    lm = _real_vllm_chat(monkeypatch)
    messages = [{"role": "user", "content": [{"type": "text", "text": "Describe."}]}]
    lm.task_dict = {"t": {"s": [{}]}}
    request = Instance("generate_until", ("Describe.", lambda doc: messages, {"max_new_tokens": 24}, 0, "t", "s"),
                       0, {"task": "t", "doc_id": 0, "repeats": 1})
    lm.generate_until([request])
    assert lm.client.calls[0][0][0]["max_tokens"] == 4096  # the floor this package works around


@pytest.mark.parametrize("mode", ["pil", "encoded"])
def test_through_the_host_the_real_vllm_chat_class_keeps_the_task_length(monkeypatch, mode):
    monkeypatch.setenv("LMMS_GENBENCH_VLLM_IMAGES", mode)
    lm = _real_vllm_chat(monkeypatch, batch_size=8)
    images = [Image.new("RGB", (40, 30), (i, 2, 3)) for i in range(2)] + [Image.new("L", (40, 30), 7)]
    out = host.generate(lm, [("Describe.", {"max_new_tokens": 24, "temperature": 0.5, "until": [STOP]}, [im])
                             for im in images])
    assert out == [_words(24)[: _words(24).index(STOP)]] * 3
    (params, messages), = lm.client.calls  # one vLLM call for the batch
    assert [(p["max_tokens"], p["temperature"]) for p in params] == [(24, 0.5)] * 3
    parts = [m[0]["content"] for m in messages]
    assert [p[-1] for p in parts] == [{"type": "text", "text": "Describe."}] * 3
    if mode == "pil":  # handed over as they are: the same objects, no encoding
        assert [p[0] for p in parts[:2]] == [{"type": "image_pil", "image_pil": im} for im in images[:2]]
        # RGB, as vLLM converts the images it decodes
        assert parts[2][0]["image_pil"].mode == "RGB" and parts[2][0]["image_pil"].getpixel((0, 0)) == (7, 7, 7)
    else:  # the class's own path: base64 PNG
        assert all(p[0]["image_url"]["url"].startswith("data:image/png;base64,") for p in parts)
    assert lm.max_new_tokens == 4096 and "make_one_request" not in vars(lm) and lm.task_dict == {}


def test_an_unknown_image_mode_is_named(monkeypatch):
    monkeypatch.setenv("LMMS_GENBENCH_VLLM_IMAGES", "jpeg")
    with pytest.raises(ValueError, match="^LMMS_GENBENCH_VLLM_IMAGES: expected one of pil, encoded; got 'jpeg'"):
        host.generate(_real_vllm_chat(monkeypatch), [("Describe.", {}, [IMAGE])])


def test_the_real_openai_chat_class_sends_the_task_length_and_temperature():
    from lmms_eval.models.chat.openai import OpenAICompatible

    payloads = []

    class Completions:
        def create(self, **payload):
            payloads.append(payload)
            message = type("Message", (), {"content": _words(payload["max_tokens"])})()
            return type("Response", (), {"choices": [type("Choice", (), {"message": message})()], "usage": None})()

    lm = OpenAICompatible(model_version="some-model", api_key="unused", base_url="http://127.0.0.1:9", max_retries=1)
    lm.client = type("Client", (), {"chat": type("Chat", (), {"completions": Completions()})()})()
    out = host.generate(lm, [("Describe.", {"max_new_tokens": 24, "temperature": 0.5, "until": [STOP]}, [IMAGE])])
    assert [(p["max_tokens"], p["temperature"]) for p in payloads] == [(24, 0.5)]
    assert "stop" not in payloads[0]  # the class drops ``until``: the host cuts instead
    assert out[0].split() == ["w0", "w1", "w2", "w3", "w4"]
