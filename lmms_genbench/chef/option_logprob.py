"""Option log-probabilities computed directly on a Hugging Face LLaVA-style model.

Why this exists: in lmms-eval 0.7.3 no image model we can run here answers
``loglikelihood`` requests: ``llava_hf`` tokenises the context alone with the
``<image>`` token but without the image, which transformers 5 rejects ("Found 1
<image> tokens in the text but no images were passed"); ``qwen2_vl`` and
``qwen2_5_vl`` raise NotImplementedError. For inner models of that family the
``chef`` model can score options itself (``ppl=hf``) with the inner model's own
network, processor and chat template, the way ``llava_hf.loglikelihood``
intends, and with ChEF's definition: the mean log-probability of the option's
tokens only (the chat template's end-of-turn tokens are not scored).
"""

from __future__ import annotations

from typing import Any

IMAGE_TOKEN = "<image>"
# lmms-eval's llava_hf falls back to this template when the tokenizer has none
VICUNA_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.index0 == 0 %}A chat between a curious user and an artificial "
    "intelligence assistant. The assistant gives helpful, detailed, and polite answers to the user's questions. "
    "USER: {{ message['content'] }} {% elif message['role'] == 'user' %}USER: {{ message['content'] }} {% else %} "
    "ASSISTANT: {{ message['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


def supports_hf_scoring(inner: Any) -> bool:
    return all(hasattr(inner, a) for a in ("model", "tokenizer", "_image_processor"))


def option_logprob(inner: Any, context: str, continuation: str, images: list) -> tuple[float, int]:
    """(mean log-probability of ``continuation``'s tokens, their number) after ``context``."""
    import torch

    tokenizer, processor, model = inner.tokenizer, inner._image_processor, inner.model
    if images:
        context = f"{' '.join([IMAGE_TOKEN] * len(images))}\n{context}"
    template = getattr(inner, "chat_template", None) or tokenizer.chat_template or VICUNA_CHAT_TEMPLATE
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": context}], tokenize=False,
                                           add_generation_prompt=True, chat_template=template)
    kwargs = {"images": images} if images else {}
    full = processor(text=[prompt + continuation], return_tensors="pt", **kwargs).to(model.device, model.dtype)
    ctx_ids = processor(text=[prompt], return_tensors="pt", **kwargs)["input_ids"][0]
    n_ctx = ctx_ids.shape[0]
    ids = full["input_ids"][0]
    if not bool((ids[:n_ctx].cpu() == ctx_ids).all()):
        # the option would merge with the context's last token: its tokens are not separable
        raise ValueError(f"continuation {continuation!r} changes the tokenisation of the context; "
                         "start options with a space")
    n = ids.shape[0] - n_ctx
    if n <= 0:
        raise ValueError(f"continuation {continuation!r} adds no tokens after the context")
    with torch.inference_mode():
        logits = model(**full).logits[0].float()
    logp = torch.log_softmax(logits[n_ctx - 1:-1], dim=-1).gather(1, ids[n_ctx:, None]).squeeze(1)
    return float(logp.mean()), int(n)
