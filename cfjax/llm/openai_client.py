"""A :class:`~cfjax.llm.base.TextBackbone` for OpenAI-compatible servers.

Any server that speaks the chat-completions protocol works: vLLM
(``vllm serve``), the llama.cpp server, Ollama (``/v1``), or the hosted API.
The client renders the shared templates of :mod:`cfjax.llm.prompts`, sends
the prompt as a single user message and parses the reply with the shared
parsers, so token accounting and output contracts are identical to every
other backbone.

Only the standard library is used (``urllib.request``). A call keeps no
shared mutable state apart from lock-protected counters, so one instance can
serve a thread pool.

Example:
    >>> cfg = OpenAIConfig(base_url="http://127.0.0.1:8000/v1", model="qwen")  # doctest: +SKIP
    >>> backbone = OpenAIBackbone(cfg)  # doctest: +SKIP
    >>> backbone.draft_action(DraftRequest(task))  # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from cfjax.llm import prompts
from cfjax.llm.base import Completion, TextBackbone, Usage

__all__ = ["LLMError", "OpenAIConfig", "CallStats", "OpenAIBackbone", "ENV_VARS", "MAX_BACKOFF_S"]

#: Environment variables read by :meth:`OpenAIConfig.from_env`, first match wins.
ENV_VARS: dict[str, tuple[str, ...]] = {
    "base_url": ("CFJAX_LLM_BASE_URL", "OPENAI_BASE_URL"),
    "model": ("CFJAX_LLM_MODEL",),
    "api_key": ("CFJAX_LLM_API_KEY", "OPENAI_API_KEY"),
}

#: Upper bound (seconds) on any single wait between retries.
MAX_BACKOFF_S = 30.0

#: HTTP statuses that are retried (with backoff); every other 4xx fails at once.
_RETRY_STATUSES = frozenset({408, 409, 425, 429})

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class LLMError(RuntimeError):
    """A chat-completions call failed for good.

    Raised for a non-retryable HTTP status (a 4xx other than 408/409/425/429),
    for a malformed reply (not JSON, no ``choices``, no message content), and
    when every retry of a transient failure (connection error, timeout, 429,
    5xx) has been used up.

    Attributes:
      status: the HTTP status of the last response, or ``None`` when no
        response arrived (connection error, timeout) or the reply was malformed.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class OpenAIConfig:
    """Connection and sampling settings of an :class:`OpenAIBackbone`.

    Attributes:
      base_url: the API root including the version prefix, e.g.
        ``"http://127.0.0.1:8000/v1"``; requests go to
        ``{base_url}/chat/completions``. A trailing ``/`` is dropped.
      model: the model name the server expects.
      api_key: sent as ``Authorization: Bearer <api_key>`` when set.
      temperature: sampling temperature.
      max_tokens: completion token limit per call.
      timeout_s: socket timeout of one HTTP attempt, in seconds.
      max_retries: extra attempts after a transient failure (0 = try once).
      backoff_s: the first wait between attempts; it doubles per retry and is
        capped at :data:`MAX_BACKOFF_S`.
      seed: sent as ``seed`` when set (vLLM and OpenAI honour it).
    """

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        url = (self.base_url or "").strip().rstrip("/")
        scheme = urllib.parse.urlsplit(url).scheme
        if scheme not in ("http", "https") or not urllib.parse.urlsplit(url).netloc:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty string")
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0, got {self.backoff_s}")
        object.__setattr__(self, "base_url", url)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "OpenAIConfig":
        """Build a config from the environment; keyword overrides win.

        ``base_url`` comes from ``CFJAX_LLM_BASE_URL`` (else
        ``OPENAI_BASE_URL``), ``model`` from ``CFJAX_LLM_MODEL`` and
        ``api_key`` from ``CFJAX_LLM_API_KEY`` (else ``OPENAI_API_KEY``).

        Args:
          environ: the mapping to read instead of ``os.environ`` (tests).
          **overrides: any :class:`OpenAIConfig` field.

        Returns:
          The config.

        Raises:
          ValueError: ``base_url`` or ``model`` is neither overridden nor set
            in the environment (the message names the variables), or a
            value is invalid.
          TypeError: an override names no config field.
        """
        env = os.environ if environ is None else environ
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(f"unknown OpenAIConfig field(s): {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for key, names in ENV_VARS.items():
            if overrides.get(key) is not None:
                continue
            for name in names:
                if env.get(name):
                    values[key] = env[name]
                    break
        values.update({k: v for k, v in overrides.items() if v is not None or k not in ENV_VARS})
        missing = [k for k in ("base_url", "model") if not values.get(k)]
        if missing:
            wanted = "; ".join(f"{k}: set {' or '.join(ENV_VARS[k])}" for k in missing)
            raise ValueError(f"OpenAI-compatible backbone is not configured ({wanted}, or pass {', '.join(missing)}=...)")
        return cls(**values)

    def redacted(self) -> "OpenAIConfig":
        """A copy safe to log: the API key, if any, is replaced by ``"***"``."""
        return replace(self, api_key="***" if self.api_key else None)

    def __repr__(self) -> str:  # never print the key
        r = self.redacted()
        parts = ", ".join(f"{f.name}={getattr(r, f.name)!r}" for f in fields(r))
        return f"OpenAIConfig({parts})"


@dataclass(frozen=True)
class CallStats:
    """Counters of one backbone instance.

    Attributes:
      calls: ``_complete`` calls started.
      failures: calls that ended in :class:`LLMError`.
      retries: extra HTTP attempts made after transient failures.
      usage: summed usage of the successful calls.
    """

    calls: int = 0
    failures: int = 0
    retries: int = 0
    usage: Usage = Usage()


class OpenAIBackbone(TextBackbone):
    """The CounterMem :class:`~cfjax.llm.base.Backbone` over chat completions.

    Args:
      config: connection and sampling settings.
      sleep: the wait function used between retries (tests may stub it).

    Attributes:
      name: ``"openai:<model>"``.
      config: the settings.
    """

    def __init__(self, config: OpenAIConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        self._url = f"{config.base_url}/chat/completions"
        self._sleep = sleep
        self._lock = threading.Lock()
        self._stats = CallStats()
        host = urllib.parse.urlsplit(config.base_url).hostname or ""
        # A loopback server is never reached through an environment proxy.
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK_HOSTS else []
        self._opener = urllib.request.build_opener(*handlers)

    @classmethod
    def from_env(cls, **overrides: Any) -> "OpenAIBackbone":
        """``OpenAIBackbone(OpenAIConfig.from_env(**overrides))``."""
        return cls(OpenAIConfig.from_env(**overrides))

    def __repr__(self) -> str:
        return f"OpenAIBackbone({self.config!r})"

    @property
    def stats(self) -> CallStats:
        """A snapshot of the call counters."""
        with self._lock:
            return self._stats

    def _bump(self, calls: int = 0, failures: int = 0, retries: int = 0, usage: Usage | None = None) -> None:
        with self._lock:
            s = self._stats
            self._stats = CallStats(
                s.calls + calls, s.failures + failures, s.retries + retries, s.usage + usage if usage else s.usage
            )

    def request_body(self, prompt: str) -> dict[str, Any]:
        """The JSON body sent for ``prompt``."""
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens,
        }
        if cfg.seed is not None:
            body["seed"] = cfg.seed
        return body

    def _complete(self, kind: str, prompt: str, req: object) -> Completion:
        """POST ``prompt`` and return the reply text with its usage.

        Args:
          kind: the template name (used in error messages only).
          prompt: the rendered prompt.
          req: the structured request (ignored).

        Returns:
          The completion; usage is the server's ``usage`` when reported,
          otherwise :func:`cfjax.llm.prompts.count_tokens` of prompt and reply.

        Raises:
          LLMError: see :class:`LLMError`.
        """
        self._bump(calls=1)
        try:
            data = self._post_with_retries(kind, json.dumps(self.request_body(prompt)).encode("utf-8"))
            text = self._reply_text(kind, data)
        except LLMError:
            self._bump(failures=1)
            raise
        usage = _usage(data.get("usage"), prompt, text)
        self._bump(usage=usage)
        return Completion(text, usage)

    def _post_with_retries(self, kind: str, payload: bytes) -> dict[str, Any]:
        cfg = self.config
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "cfjax"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        attempts = cfg.max_retries + 1
        last = ""
        last_status: int | None = None
        for attempt in range(attempts):
            if attempt:
                self._bump(retries=1)
            retry_after = 0.0
            request = urllib.request.Request(self._url, data=payload, headers=headers, method="POST")
            try:
                with self._opener.open(request, timeout=cfg.timeout_s) as resp:
                    raw = resp.read()
                    status = resp.status
            except urllib.error.HTTPError as e:
                status, detail = e.code, _error_detail(e)
                retry_after = _retry_after(e.headers)
                e.close()
                if status not in _RETRY_STATUSES and status < 500:
                    raise LLMError(f"{kind}: {self._url} answered HTTP {status}: {detail}", status) from None
                last, last_status = f"HTTP {status}: {detail}", status
            except (OSError, http.client.HTTPException) as e:  # URLError, refused, reset, timeout
                reason = getattr(e, "reason", None) or e
                last, last_status = f"{type(reason).__name__}: {reason}", None
            else:
                try:
                    data = json.loads(raw)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    raise LLMError(
                        f"{kind}: malformed reply from {self._url} (HTTP {status}, not JSON): {_snippet(raw)}"
                    ) from None
                if not isinstance(data, dict):
                    raise LLMError(f"{kind}: malformed reply from {self._url} (not a JSON object): {_snippet(raw)}")
                return data
            if attempt + 1 < attempts:
                delay = min(MAX_BACKOFF_S, max(cfg.backoff_s * 2**attempt, retry_after))
                if delay > 0:
                    self._sleep(delay)
        raise LLMError(
            f"{kind}: {self._url} failed after {attempts} attempt(s); last error: {last}", last_status
        )

    def _reply_text(self, kind: str, data: dict[str, Any]) -> str:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError(f"{kind}: malformed reply from {self._url}: no choices: {_snippet(json.dumps(data))}")
        first = choices[0]
        message = first.get("message")
        text = message.get("content") if isinstance(message, dict) else first.get("text")
        if not isinstance(text, str):
            raise LLMError(
                f"{kind}: malformed reply from {self._url}: no message content: {_snippet(json.dumps(data))}"
            )
        return text


def _usage(reported: object, prompt: str, text: str) -> Usage:
    """The server's usage where it reports it, estimated otherwise (per field)."""
    rep = reported if isinstance(reported, dict) else {}

    def pick(key: str, fallback: str) -> int:
        v = rep.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
        return prompts.count_tokens(fallback)

    return Usage(pick("prompt_tokens", prompt), pick("completion_tokens", text))


def _snippet(raw: bytes | str, n: int = 300) -> str:
    s = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    s = " ".join(s.split())
    return s if len(s) <= n else s[:n] + " …"


def _error_detail(e: urllib.error.HTTPError) -> str:
    try:
        raw = e.read()
    except Exception:  # noqa: BLE001 - the body is only decoration
        return str(e.reason)
    try:
        err = json.loads(raw).get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        if isinstance(msg, str) and msg:
            return _snippet(msg)
    except (ValueError, AttributeError):
        pass
    return _snippet(raw) or str(e.reason)


def _retry_after(headers: Any) -> float:
    try:
        v = float(headers.get("Retry-After", 0) or 0) if headers is not None else 0.0
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, v)
