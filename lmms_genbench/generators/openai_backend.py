"""Text-to-image through the OpenAI Images API (or a compatible server).

Talks to ``POST {base_url}/images/generations`` with ``httpx`` directly, so
retries, timeouts and what gets logged are under our control.

Seeds: the API takes no seed, so the ``seeds`` passed to :meth:`generate`
are ignored and the same prompt can give a different image on every call
(DALL-E 3 also rewrites prompts server-side). Cache these images; do not
expect to reproduce them.

The API key is read from the environment on every :meth:`generate` call and
kept only in the request headers: it is never stored on the object, and any
text that could end up in a log, exception or failure record is scrubbed of
it. The constructor checks only that the variable is set, so a run without a
key stops at load; no request is made (a probe could cost money).
"""

from __future__ import annotations

import base64
import email.utils
import io
import logging
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from PIL import Image

from ..core.args import ArgumentError, as_float, as_int, as_str
from ..core.keys import generator_name, name_record
from ..core.failures import GenerationFailure, GeneratorConfigError
from .base import GenerationResult

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Waits are capped so a bogus Retry-After cannot stall a run for hours.
_MAX_DELAY_S = 120.0
_MAX_MESSAGE_CHARS = 500
# Statuses that mean the configuration is wrong (key, permission, model or
# endpoint): every prompt would fail the same way, so stop instead.
_FATAL_STATUSES = frozenset({401, 403, 404})
# 429 codes that retrying cannot fix.
_FATAL_429_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})

# Per model family: accepted quality values -> the value sent.
_GPT_IMAGE_QUALITY = {
    "standard": "medium",  # DALL-E's names, mapped so one config fits both
    "hd": "high",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "auto": "auto",
}
_DALLE_QUALITY = {
    "dall-e-3": {"standard": "standard", "hd": "hd"},
    "dall-e-2": {"standard": "standard"},
}


class MissingAPIKeyError(GeneratorConfigError):
    """The environment variable that should hold the API key is unset."""


class OpenAIConfigError(GeneratorConfigError):
    """The API refused the request in a way no retry or other prompt fixes."""


class OpenAIImageGenerator:
    """Generate images with the OpenAI Images API.

    Args:
        model: Model id, e.g. ``dall-e-3``, ``dall-e-2`` or ``gpt-image-1``.
        base_url: API root; point it at any OpenAI-compatible server.
        size: ``WIDTHxHEIGHT`` (or ``auto`` for gpt-image models); the API
            checks which sizes each model supports.
        quality: ``standard``/``hd`` for DALL-E 3; for gpt-image models
            ``low``/``medium``/``high``/``auto``, with ``standard`` sent as
            ``medium`` and ``hd`` as ``high``; passed through for other models.
        timeout: Seconds allowed per HTTP request.
        max_retries: Retries after the first attempt on 429, 5xx, timeouts
            and network errors.
        backoff: Base of the exponential backoff in seconds: the n-th retry
            waits about ``backoff * 2**n`` (with jitter) unless the server's
            ``Retry-After`` says how long.
        api_key_env: Name of the environment variable holding the API key.
        batch_size: Requests in flight at once.
        transport: An ``httpx`` transport, e.g. ``httpx.MockTransport`` in
            tests; ``None`` uses the network.

    Errors: a prompt the API refuses (e.g. a content-policy 400) or that
    still fails after the retries becomes a :class:`GenerationFailure` with
    the API's message. A missing key raises :class:`MissingAPIKeyError`, from
    the constructor and from :meth:`generate`; a 401/403/404 or an exhausted
    quota raises :class:`OpenAIConfigError`. Both carry a ``fix``.
    """

    def __init__(
        self,
        model: str = "dall-e-3",
        base_url: str = DEFAULT_BASE_URL,
        size: str = "1024x1024",
        quality: str = "standard",
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 2.0,
        api_key_env: str = "OPENAI_API_KEY",
        batch_size: int = 4,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = str(as_str("model", model))
        self.base_url = str(as_str("base_url", base_url)).rstrip("/")
        if not re.match(r"^https?://", self.base_url):
            raise ArgumentError(
                f"base_url: expected an http:// or https:// URL; got {base_url!r}"
            )
        self.size = str(as_str("size", size)).lower()
        if not re.fullmatch(r"\d+x\d+|auto", self.size):
            raise ArgumentError(
                f"size: expected WIDTHxHEIGHT such as '1024x1024', or 'auto'; got {size!r}"
            )
        self.quality = _resolve_quality(self.model, str(as_str("quality", quality)))
        self.timeout = float(as_float("timeout", timeout, minimum=0.001))  # type: ignore[arg-type]
        self.max_retries = int(as_int("max_retries", max_retries, minimum=0))  # type: ignore[arg-type]
        self.backoff = float(as_float("backoff", backoff, minimum=0.0))  # type: ignore[arg-type]
        self.api_key_env = str(as_str("api_key_env", api_key_env))
        self.batch_size = int(as_int("batch_size", batch_size, minimum=1))  # type: ignore[arg-type]
        self.transport = transport
        self._api_key()  # a missing key stops the run at load, before any doc
        # Swappable so tests can record waits instead of sleeping.
        self._sleep: Callable[[float], None] = time.sleep

        settings = {"model": self.model, "base_url": self.base_url, "size": self.size, "quality": self.quality}
        self.name = generator_name("openai", self.model, settings)
        #: what made the name, written beside the store's folder (store/identity.py)
        self.identity = name_record("openai", self.model, settings)

    def __repr__(self) -> str:
        return (
            f"OpenAIImageGenerator(model={self.model!r}, base_url={self.base_url!r}, "
            f"size={self.size!r}, quality={self.quality!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int]
    ) -> list[GenerationResult]:
        """One image or :class:`GenerationFailure` per prompt, in order.

        ``seeds`` only has to match ``prompts`` in length; the API has no seed.
        """
        prompts = list(prompts)
        if len(prompts) != len(seeds):
            raise ValueError(
                f"generate: expected one seed per prompt; got {len(prompts)} "
                f"prompts and {len(seeds)} seeds"
            )
        if not prompts:
            return []
        key = self._api_key()
        with httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=self.timeout,
            transport=self.transport,
        ) as client:
            workers = min(self.batch_size, len(prompts))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(lambda p: self._request(client, p, key), prompts))

    def _api_key(self) -> str:
        """The key from the environment; :class:`MissingAPIKeyError` if unset."""
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise MissingAPIKeyError(
                f"the openai generator needs an API key in the environment "
                f"variable {self.api_key_env} (set api_key_env to use another "
                "variable), but it is unset or empty",
                fix=f"export {self.api_key_env}=<your API key>, or name the variable "
                "that holds it with generator.api_key_env=<VARIABLE>",
            )
        return key

    def _config_fix(self, status: int) -> str:
        """What to change for a status that every request would get."""
        if status == 401:
            return f"set {self.api_key_env} to a valid key for {self.base_url}"
        if status == 403:
            return (f"use a key whose project may use model {self.model!r}, "
                    "or another generator.model")
        if status == 404:
            return (f"check generator.base_url (the API root, e.g. {DEFAULT_BASE_URL}; "
                    f"here {self.base_url}) and generator.model (here {self.model!r})")
        return "add credit or quota to the key's account, or use another key"

    def _payload(self, prompt: str) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "n": 1,
            "size": self.size,
            "quality": self.quality,
        }
        # gpt-image models always answer in base64 and reject this field.
        if not self.model.startswith("gpt-image"):
            payload["response_format"] = "b64_json"
        return payload

    def _request(self, client: httpx.Client, prompt: str, key: str) -> GenerationResult:
        attempts = self.max_retries + 1
        payload = self._payload(prompt)
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                response = client.post("/images/generations", json=payload)
            except httpx.TimeoutException:
                problem = f"request timed out after {self.timeout:g}s"
            except httpx.TransportError as exc:
                problem = f"network error: {type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return _decode_image(response)
                message = _scrub(_error_message(response), key)
                if status in _FATAL_STATUSES or (
                    status == 429 and _error_code(response) in _FATAL_429_CODES
                ):
                    raise OpenAIConfigError(
                        f"openai images API answered HTTP {status} for model "
                        f"{self.model!r} at {self.base_url}: {message}",
                        fix=self._config_fix(status),
                    )
                if status != 429 and status < 500:
                    # The API judged this prompt (e.g. content policy): final.
                    return GenerationFailure(f"HTTP {status}: {message}")
                problem = f"HTTP {status}: {message}"
                retry_after = _retry_after_seconds(response)
            problem = _scrub(problem, key)
            if attempt == attempts - 1:
                return GenerationFailure(
                    f"{problem} (gave up after {attempts} attempts)"
                )
            delay = self._delay(attempt, retry_after)
            logger.warning(
                "openai images: %s; retry %d of %d in %.1fs",
                problem,
                attempt + 1,
                self.max_retries,
                delay,
            )
            self._sleep(delay)
        raise AssertionError("unreachable: the loop returns on its last attempt")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # The server knows best; a little jitter keeps the concurrent
            # workers from all coming back in the same instant.
            return min(
                retry_after + random.uniform(0, 0.1 * self.backoff), _MAX_DELAY_S
            )
        base = self.backoff * (2**attempt)
        return min(base * random.uniform(0.5, 1.5), _MAX_DELAY_S)


def _resolve_quality(model: str, quality: str) -> str:
    value = quality.strip().lower()
    if model.startswith("gpt-image"):
        table = _GPT_IMAGE_QUALITY
    elif model in _DALLE_QUALITY:
        table = _DALLE_QUALITY[model]
    else:
        return value  # an unknown (compatible) server decides for itself
    if value not in table:
        raise ArgumentError(
            f"quality: expected one of {', '.join(map(repr, table))} for model "
            f"{model!r}; got {quality!r}"
        )
    return table[value]


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _error_code(response: httpx.Response) -> str | None:
    code = _error_body(response).get("code")
    return str(code) if code is not None else None


def _error_message(response: httpx.Response) -> str:
    error = _error_body(response)
    message = str(error.get("message") or response.text or response.reason_phrase)
    code = error.get("code") or error.get("type")
    text = f"{message} ({code})" if code else message
    return text[:_MAX_MESSAGE_CHARS]


def _retry_after_seconds(response: httpx.Response) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (number or date)."""
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _decode_image(response: httpx.Response) -> GenerationResult:
    try:
        data = response.json()["data"][0]
        encoded = data["b64_json"]
    except (ValueError, KeyError, IndexError, TypeError):
        return GenerationFailure(
            "the API answered 2xx without an image in data[0].b64_json"
        )
    try:
        image = Image.open(io.BytesIO(base64.b64decode(encoded)))
        image.load()
    except Exception as exc:  # noqa: BLE001 - PIL raises many types
        return GenerationFailure(f"could not decode the returned image: {exc}")
    return image.convert("RGB")


def _scrub(text: str, key: str) -> str:
    # Servers and network errors may echo request details; never pass the
    # key on into logs, exceptions or per-sample failure records.
    return text.replace(key, "[redacted]") if key else text
