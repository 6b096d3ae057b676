"""A :class:`~cfjax.llm.base.TextBackbone` for OpenAI-compatible servers.

Any server that speaks the chat-completions protocol works: vLLM
(``vllm serve``), the llama.cpp server, Ollama (``/v1``), or the hosted API.
The client renders the shared templates of :mod:`cfjax.llm.prompts`, sends
the prompt as a single user message and parses the reply with the shared
parsers, so token accounting and output contracts are identical to every
other backbone.

Transport: the official ``openai`` SDK's ``AsyncOpenAI`` client on one asyncio
event loop per process (a daemon thread). Callers stay synchronous and may
call from many threads at once (held-out evaluation runs episodes in
threads): ``_complete`` hands a coroutine to the loop and waits. At most
``max_inflight`` requests of one backbone are on the wire at a time (an
``asyncio.Semaphore``; the HTTP connection pool holds as many connections).

Fault tolerance (the SDK's own retries are off so that every fault is counted):

- retried with exponential backoff and jitter: HTTP 408/409/425/429 and 5xx,
  connection errors and resets, timeouts, and malformed replies (a body that
  is not JSON, empty ``choices``, null or missing content, wrong types).
  ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms`` are
  honoured, capped at :data:`MAX_BACKOFF_S`; all attempts of one call fit in
  ``total_timeout_s``, each in ``timeout_s``;
- a configuration error — any other 4xx (400, 401, 403, 404, 422, ...) —
  raises :class:`LLMError` at once: a wrong URL, model or key must fail
  loudly, not turn into a 0% success rate. A 413, or a 400 whose message says
  the prompt exceeds the model's context, is a property of that one prompt:
  the call fails (below) without retries and the run goes on;
- when the retries or the time budget are used up the call returns
  ``Completion("", Usage(prompt_estimate, 0, failed=1))``: the caller parses
  "" (a failed attempt) and the ledger counts a failed LLM call. A server
  fault never raises during a run;
- the reply text is sanitised (:mod:`cfjax.llm.sanitize`: lone surrogates,
  control characters, ``\\r\\n``) and cut to ``max_reply_chars``.

Everything is counted in :meth:`OpenAIBackbone.stats` (a :class:`CallStats`).

Length: one transport — config, the event-loop thread, the retry loop and the
classification of every fault into its counter — read best in one place; the
reply sanitising and the response cache already live in their own modules.

Example:
    >>> cfg = OpenAIConfig(base_url="http://127.0.0.1:8000/v1", model="qwen",  # doctest: +SKIP
    ...                    cache_path="runs/llm_cache.sqlite")
    >>> backbone = OpenAIBackbone(cfg)  # doctest: +SKIP
    >>> from cfjax.llm.calls import DRAFT_ACTION  # doctest: +SKIP
    >>> backbone.call(DRAFT_ACTION, DraftRequest(task))  # doctest: +SKIP
    >>> backbone.stats().as_dict()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import inspect
import json
import logging
import os
import random
import re
import threading
import time
import urllib.parse
import weakref
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, fields, replace
from typing import Any

from cfjax.llm import prompts
from cfjax.llm.base import Completion, TextBackbone, Usage
from cfjax.llm.cache import ResponseCache
from cfjax.llm.sanitize import sanitize_reply

__all__ = [
    "LLMError",
    "OpenAIConfig",
    "CallStats",
    "OpenAIBackbone",
    "SharedTransport",
    "ENV_VARS",
    "MAX_BACKOFF_S",
    "FAULT_KINDS",
    "RETRY_STATUSES",
    "sample_seed",
]

log = logging.getLogger(__name__)

#: Environment variables read by :meth:`OpenAIConfig.from_env`, first match wins.
ENV_VARS: dict[str, tuple[str, ...]] = {
    "base_url": ("CFJAX_LLM_BASE_URL", "OPENAI_BASE_URL"),
    "model": ("CFJAX_LLM_MODEL",),
    "api_key": ("CFJAX_LLM_API_KEY", "OPENAI_API_KEY"),
}

#: Upper bound (seconds) on any single wait between retries, ``Retry-After`` included.
MAX_BACKOFF_S = 30.0

#: 4xx statuses that are retried (with backoff) like 5xx; every other 4xx is a configuration error.
RETRY_STATUSES = frozenset({408, 409, 425, 429})

#: The fault counters of :class:`CallStats` (one per failed HTTP attempt).
FAULT_KINDS = ("http_429", "http_5xx", "http_other", "reset", "timeout", "not_json", "empty_choices",
               "null_content", "bad_shape")

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

# A 400 with one of these in its message means "this prompt is too long for the model": a per-prompt
# failure, not a configuration error (vLLM, llama.cpp, OpenAI and TGI word it like this).
_TOO_LONG = re.compile(r"context[ _-]?length|maximum context|context window|too many tokens|prompt is too long|"
                       r"exceeds the (?:model'?s )?(?:maximum|context)", re.IGNORECASE)


class LLMError(RuntimeError):
    """A chat-completions call is misconfigured.

    Raised at once, without retries, for a non-retryable HTTP status (a 4xx
    other than 408/409/425/429, e.g. 400, 401, 403, 404, 422): a wrong URL,
    model name or key. Transient faults and malformed replies never raise;
    they are retried and then end as a failed :class:`~cfjax.types.Completion`.

    Attributes:
      status: the HTTP status of the response.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class OpenAIConfig:
    """Connection and sampling settings of an :class:`OpenAIBackbone` (frozen and picklable).

    Attributes:
      base_url: the API root including the version prefix, e.g.
        ``"http://127.0.0.1:8000/v1"``; requests go to
        ``{base_url}/chat/completions``. A trailing ``/`` is dropped.
      model: the model name the server expects.
      api_key: sent as ``Authorization: Bearer <api_key>`` when set (never printed).
      temperature: sampling temperature.
      max_tokens: completion token limit per call.
      timeout_s: the limit of one HTTP attempt, in seconds.
      max_retries: extra attempts after a transient fault (0 = try once).
      backoff_s: the base wait between attempts; it doubles per retry, with
        jitter (a factor in [0.5, 1)), at least any ``Retry-After``, capped at
        :data:`MAX_BACKOFF_S`.
      seed: sent as ``seed`` when set (vLLM and OpenAI honour it); also seeds the jitter.
      max_inflight: requests of this backbone on the wire at once.
      total_timeout_s: the limit of one call, all attempts and waits included
        (counted from the moment the call first gets one of the ``max_inflight`` slots).
      max_reply_chars: longer replies are cut to this many characters (and counted).
      slow_s: an attempt answered after at least this many seconds counts as ``slow``.
      cache_path: an SQLite file of cached replies (:class:`~cfjax.llm.cache.ResponseCache`); ``None`` = no cache.
      cache_force: use the cache even when ``temperature > 0`` (off by default: a sampled
        reply is one draw, and replaying it makes every rerun the same draw).
    """

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    timeout_s: float = 60.0
    max_retries: int = 5
    backoff_s: float = 1.0
    seed: int | None = None
    max_inflight: int = 32
    total_timeout_s: float = 300.0
    max_reply_chars: int = 65_536
    slow_s: float = 2.0
    cache_path: str | None = None
    cache_force: bool = False

    def __post_init__(self) -> None:
        url = (self.base_url or "").strip().rstrip("/")
        scheme = urllib.parse.urlsplit(url).scheme
        if scheme not in ("http", "https") or not urllib.parse.urlsplit(url).netloc:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty string")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        for name in ("max_tokens", "max_inflight", "max_reply_chars"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("timeout_s", "total_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0, got {self.backoff_s}")
        if self.slow_s < 0:
            raise ValueError(f"slow_s must be >= 0, got {self.slow_s}")
        if self.cache_path is not None and not str(self.cache_path).strip():
            raise ValueError("cache_path must be a file path or None")
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
    """Counters of one :class:`OpenAIBackbone` (a snapshot; see :meth:`OpenAIBackbone.stats`).

    ``calls == cached + ok + failed_calls`` once every call has returned.

    Attributes:
      calls: backbone calls (each ``call(kind, req)`` of any kind — DRAFT_ACTION, BEST_OF_N_JUDGE, ... — is one).
      sent: HTTP attempts sent to the server (first tries and retries).
      cached: calls answered from the response cache (no request sent).
      ok: calls answered by the server with a usable reply.
      failed_calls: calls that ended without a usable reply (every retry or the
        time budget used up, or the prompt was too long): they return
        ``usage.failed == 1``.
      retries: attempts after the first one of a call.
      faults: failed attempts by kind (:data:`FAULT_KINDS`): ``http_429``,
        ``http_5xx``, ``http_other`` (408/409/425, or a prompt too long),
        ``reset`` (connection refused, reset or closed without a response),
        ``timeout``, ``not_json``, ``empty_choices``, ``null_content``,
        ``bad_shape`` (JSON of the wrong types).
      sanitised: replies whose text was altered by sanitising (surrogates, controls, ``\\r\\n``).
      truncated: replies cut to ``max_reply_chars``.
      slow: attempts answered (any status) after ``slow_s`` seconds or more.
      prompt_tokens: prompt tokens of the ``ok`` calls (server usage, else counted client-side).
      completion_tokens: completion tokens of the ``ok`` calls.
      max_inflight_seen: the most HTTP requests of this backbone on the wire at once.
      mean_inflight: the time-weighted mean of requests on the wire while at least one was.
      busy_s: wall seconds during which at least one request was on the wire.
    """

    calls: int = 0
    sent: int = 0
    cached: int = 0
    ok: int = 0
    failed_calls: int = 0
    retries: int = 0
    faults: Mapping[str, int] = field(default_factory=lambda: {k: 0 for k in FAULT_KINDS})
    sanitised: int = 0
    truncated: int = 0
    slow: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    max_inflight_seen: int = 0
    mean_inflight: float = 0.0
    busy_s: float = 0.0

    @property
    def usage(self) -> Usage:
        """Tokens of the calls the server answered (cache hits are not counted here)."""
        return Usage(self.prompt_tokens, self.completion_tokens)

    @property
    def fault_total(self) -> int:
        """All failed attempts."""
        return sum(self.faults.values())

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every counter (``faults`` as a nested dict, in :data:`FAULT_KINDS` order)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["faults"] = {k: int(self.faults.get(k, 0)) for k in FAULT_KINDS}
        out["mean_inflight"] = round(self.mean_inflight, 4)
        out["busy_s"] = round(self.busy_s, 4)
        return out


class _Counters:
    """The mutable, lock-protected counters behind :class:`CallStats`."""

    _INTS = ("calls", "sent", "cached", "ok", "failed_calls", "retries", "sanitised", "truncated", "slow",
             "prompt_tokens", "completion_tokens")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n = dict.fromkeys(self._INTS, 0)
        self._faults = dict.fromkeys(FAULT_KINDS, 0)
        self._inflight = 0
        self._max_inflight = 0
        self._area = 0.0  # integral of (requests in flight) dt while >= 1
        self._busy = 0.0
        self._t_last = 0.0

    def add(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                self._n[k] += v

    def fault(self, kind: str) -> None:
        with self._lock:
            self._faults[kind] += 1

    def _advance(self, now: float) -> None:
        if self._inflight:
            dt = now - self._t_last
            self._area += self._inflight * dt
            self._busy += dt
        self._t_last = now

    def enter(self) -> None:
        with self._lock:
            self._advance(time.monotonic())
            self._inflight += 1
            self._n["sent"] += 1
            self._max_inflight = max(self._max_inflight, self._inflight)

    def leave(self) -> None:
        with self._lock:
            self._advance(time.monotonic())
            self._inflight -= 1

    def snapshot(self) -> CallStats:
        with self._lock:
            self._advance(time.monotonic())
            mean = self._area / self._busy if self._busy > 0 else 0.0
            return CallStats(**self._n, faults=dict(self._faults), max_inflight_seen=self._max_inflight,
                             mean_inflight=mean, busy_s=self._busy)


# --------------------------------------------------------------------------- the event loop


class _LoopThread:
    """One asyncio event loop running forever in a daemon thread (one per process)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="cfjax-llm-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def alive(self) -> bool:
        return self.pid == os.getpid() and self.thread.is_alive() and not self.loop.is_closed()


_LOOP: _LoopThread | None = None
_LOOP_LOCK = threading.Lock()


def _forget_loop_in_child() -> None:
    """A forked child has no loop thread (threads do not survive fork) and a possibly held lock."""
    global _LOOP, _LOOP_LOCK
    _LOOP, _LOOP_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_loop_in_child)


def _event_loop() -> _LoopThread:
    """This process's client loop, started on first use (and again in a forked child)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or not _LOOP.alive:
            _LOOP = _LoopThread()
        return _LOOP


class _Transport:
    """The ``AsyncOpenAI`` client and semaphore of one backbone, bound to one loop and process.

    Kept apart from the backbone so that the finalizer can close it without
    holding a reference to the backbone.
    """

    def __init__(self) -> None:
        self.client: Any = None
        self.semaphore: asyncio.Semaphore | None = None
        self.loop: _LoopThread | None = None
        self.closed = False

    def close(self, wait_s: float = 5.0) -> None:
        """Close the HTTP client on its loop (waits at most ``wait_s``); idempotent."""
        self.closed = True
        client, loop, self.client, self.semaphore = self.client, self.loop, None, None
        if client is None or loop is None or not loop.alive:
            return
        if threading.current_thread() is loop.thread:
            loop.loop.create_task(client.close())
            return
        try:
            asyncio.run_coroutine_threadsafe(client.close(), loop.loop).result(timeout=wait_s)
        except Exception:  # noqa: BLE001 - best effort at shutdown; the connections die with the process
            pass


class SharedTransport(_Transport):
    """One HTTP client and one in-flight semaphore for several backbones of a process.

    The units of a job (``countermem run`` with an LLM backbone) each build their own backbone (its
    seed, counters and cache), but pass them one ``SharedTransport``: the server then sees at most
    ``max_inflight`` requests from all of them together, over one connection pool. Every backbone
    that shares it must name the same server (``base_url``, ``api_key``, ``timeout_s``); closing a
    backbone leaves the transport open — its owner calls :meth:`close` when the job is done.
    """

    def __init__(self, max_inflight: int) -> None:
        if not isinstance(max_inflight, int) or isinstance(max_inflight, bool) or max_inflight <= 0:
            raise ValueError(f"max_inflight must be a positive integer, got {max_inflight!r}")
        super().__init__()
        self.max_inflight = max_inflight
        self.lock = threading.Lock()
        self.server: tuple | None = None  # (base_url, api_key, timeout_s) of the first backbone

    def __enter__(self) -> "SharedTransport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- the backbone


@dataclass(frozen=True)
class _Fault:
    """One failed HTTP attempt."""

    kind: str  # one of FAULT_KINDS
    message: str
    retry_after: float = 0.0  # seconds the server asked us to wait
    retry: bool = True  # False: retrying cannot help (the prompt is too long)


class OpenAIBackbone(TextBackbone):
    """The CounterMem :class:`~cfjax.llm.base.Backbone` over chat completions.

    Thread-safe: one instance serves any number of caller threads, at most
    ``config.max_inflight`` of their requests on the wire at once.

    Args:
      config: connection and sampling settings.
      sleep: the wait between retries, ``sleep(seconds)``; a coroutine
        function (default :func:`asyncio.sleep`) or a plain function (tests
        pass a recorder; it is called on the client's event loop, so it must
        not block for long).
      count_tokens: counts tokens of a text when the server reports no usage
        (e.g. a Hugging Face tokenizer's counter); default
        :func:`cfjax.llm.prompts.count_tokens`.
      cache: a response cache to use instead of opening ``config.cache_path``
        (share one instance between backbones of a process).
      transport: a :class:`SharedTransport` whose client and in-flight limit this backbone
        shares with others (its ``max_inflight`` replaces ``config.max_inflight``; closing the
        backbone leaves it open).

    Attributes:
      name: ``"openai:<model>"``.
      config: the settings.
      cache: the :class:`~cfjax.llm.cache.ResponseCache`, or ``None``.

    Raises:
      ValueError: ``config.cache_path`` is not a usable cache file.
    """

    def __init__(self, config: OpenAIConfig, *, sleep: Callable[[float], Awaitable[None] | None] | None = None,
                 count_tokens: Callable[[str], int] | None = None, cache: ResponseCache | None = None,
                 transport: SharedTransport | None = None) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        self._sleep = sleep if sleep is not None else asyncio.sleep
        self._count = count_tokens if count_tokens is not None else prompts.count_tokens
        self._counters = _Counters()
        self._rng = random.Random(0 if config.seed is None else config.seed)
        self._owns_cache = cache is None and config.cache_path is not None
        self.cache = cache if cache is not None else (ResponseCache(config.cache_path) if config.cache_path else None)
        self.cache_force = config.cache_force
        if transport is not None:
            server = (config.base_url, config.api_key, config.timeout_s)
            with transport.lock:
                if transport.server is None:
                    transport.server = server
                elif transport.server != server:
                    raise ValueError("a SharedTransport serves one server: this backbone names another "
                                     "base_url, api_key or timeout_s than the backbones already on it")
            if config.max_inflight != transport.max_inflight:
                config = replace(config, max_inflight=transport.max_inflight)
                self.config = config
        self._owns_transport = transport is None
        self._transport: _Transport = _Transport() if transport is None else transport
        self._transport_lock = threading.Lock() if transport is None else transport.lock
        self._closed = False
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, self._transport.close if transport is None else (lambda: None), 2.0)
        host = urllib.parse.urlsplit(config.base_url).hostname or ""
        self._loopback = host in _LOOPBACK_HOSTS

    @classmethod
    def from_env(cls, **overrides: Any) -> "OpenAIBackbone":
        """``OpenAIBackbone(OpenAIConfig.from_env(**overrides))``."""
        return cls(OpenAIConfig.from_env(**overrides))

    def __repr__(self) -> str:
        return f"OpenAIBackbone({self.config!r})"

    # -- public ------------------------------------------------------------------------
    @property
    def max_inflight(self) -> int:
        """Requests of this backbone on the wire at once (``config.max_inflight``); callers size
        their thread pools by it (:func:`cfjax.infra.concurrency.inflight_of`)."""
        return self.config.max_inflight

    @max_inflight.setter
    def max_inflight(self, n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise ValueError(f"max_inflight must be a positive integer, got {n!r}")
        with self._transport_lock:
            if not self._owns_transport and n != self.config.max_inflight:
                raise RuntimeError(f"this backbone shares a transport of {self.config.max_inflight} requests in "
                                   "flight; size the SharedTransport instead")
            if self._transport.client is not None and n != self.config.max_inflight:
                raise RuntimeError("set max_inflight before the first call (the connection pool is sized by it)")
            self.config = replace(self.config, max_inflight=n)

    def stats(self) -> CallStats:
        """A snapshot of the call counters (thread-safe)."""
        return self._counters.snapshot()

    def cache_identity(self) -> dict[str, Any]:
        """Everything besides the prompt that determines a reply (see :class:`~cfjax.llm.base.TextBackbone`).

        The server's URL is part of it: a model *name* says little on its own (llama.cpp and Ollama
        accept any name; two servers may serve different weights or quantisations under one name)."""
        cfg = self.config
        return {"backend": "openai", "api": "chat.completions/user-message", "base_url": cfg.base_url,
                "model": cfg.model,
                "temperature": cfg.temperature, "max_tokens": cfg.max_tokens, "seed": cfg.seed,
                "max_reply_chars": cfg.max_reply_chars}

    def request_body(self, prompt: str, sample: int = 0) -> dict[str, Any]:
        """The JSON body sent for ``prompt``.

        ``seed`` is ``config.seed`` for sample 0 and :func:`sample_seed` for
        sample ``k > 0`` (``DraftRequest.sample``), so the N drafts of
        Best-of-N are N different draws on a server that honours the seed.
        """
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens,
        }
        if cfg.seed is not None:
            body["seed"] = sample_seed(cfg.seed, sample)
        return body

    def close(self) -> None:
        """Close the HTTP connections (and the cache, when this backbone opened it); idempotent.

        Later calls raise :class:`RuntimeError`. Also run by a finalizer when
        the backbone is garbage-collected or the interpreter exits.
        """
        with self._transport_lock:
            self._closed = True
            if self._owns_transport:
                self._transport.close()
        self._finalizer.detach()
        if self._owns_cache and self.cache is not None:
            self.cache.close()

    def __enter__(self) -> "OpenAIBackbone":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the call ----------------------------------------------------------------------
    def _cache_hit(self, kind: str, completion: Completion) -> None:
        self._counters.add(calls=1, cached=1)

    def _complete(self, kind: str, prompt: str, req: object) -> Completion:
        """Send ``prompt`` and return the reply text with its usage (blocking; any thread).

        Args:
          kind: the template name (used in messages only).
          prompt: the rendered prompt.
          req: the structured request; only its ``sample`` index is read (it varies the seed).

        Returns:
          The completion: usage is the server's ``usage`` when reported and
          sane, otherwise counted client-side. After every retry failed,
          ``Completion("", Usage(prompt tokens, 0, failed=1))``.

        Raises:
          LLMError: the server answered with a non-retryable 4xx (a configuration error).
          RuntimeError: the backbone was closed, or the call came from the client's own event loop.
        """
        loop = self._ensure_loop()
        if threading.current_thread() is loop.thread:
            raise RuntimeError("OpenAIBackbone._complete is blocking; do not call it from its own event loop")
        sample = getattr(req, "sample", 0)
        sample = sample if isinstance(sample, int) and not isinstance(sample, bool) else 0
        fut: Future[Completion] = asyncio.run_coroutine_threadsafe(self._acomplete(kind, prompt, sample), loop.loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # e.g. KeyboardInterrupt in the caller: do not leave the request running
            raise

    def _ensure_loop(self) -> _LoopThread:
        with self._transport_lock:
            t = self._transport
            if t.closed or self._closed:
                raise RuntimeError(f"{self!r} is closed")
            if self._pid != os.getpid():  # forked child: the parent's connections are not ours
                self._pid = os.getpid()
                t.client, t.semaphore, t.loop = None, None, None
            if t.loop is None or not t.loop.alive:
                t.loop, t.client, t.semaphore = _event_loop(), None, None
            return t.loop

    def _client(self) -> tuple[Any, asyncio.Semaphore]:
        """The SDK client and the in-flight semaphore (created on the loop thread on first use)."""
        t = self._transport
        if t.closed:
            raise RuntimeError(f"{self!r} is closed")
        if t.client is None or t.semaphore is None:
            from openai import AsyncOpenAI, DefaultAsyncHttpxClient

            try:  # the SDK's transport: httpx2 for openai 3.x, httpx before
                import httpx2 as httpx
            except ImportError:  # pragma: no cover - older SDKs
                import httpx  # type: ignore[no-redef]

            cfg = self.config
            limits = httpx.Limits(max_connections=cfg.max_inflight, max_keepalive_connections=cfg.max_inflight)
            # A loopback server is never reached through an environment proxy.
            http = DefaultAsyncHttpxClient(limits=limits, trust_env=not self._loopback)
            t.client = AsyncOpenAI(api_key=cfg.api_key or "unused", base_url=cfg.base_url, max_retries=0,
                                   timeout=cfg.timeout_s, http_client=http)
            t.semaphore = asyncio.Semaphore(cfg.max_inflight)
        return t.client, t.semaphore

    async def _acomplete(self, kind: str, prompt: str, sample: int = 0) -> Completion:
        cfg = self.config
        self._counters.add(calls=1)
        _, semaphore = self._client()
        deadline: float | None = None
        last: _Fault | None = None
        attempt = 0
        while True:
            async with semaphore:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + cfg.total_timeout_s
                remaining = deadline - now
                if remaining <= 0:
                    break
                outcome = await self._attempt(kind, prompt, sample, min(cfg.timeout_s, remaining))
            if isinstance(outcome, Completion):
                return outcome
            last = outcome
            self._counters.fault(outcome.kind)
            if not outcome.retry or attempt >= cfg.max_retries:
                break
            delay = self._backoff(attempt, outcome.retry_after)
            if time.monotonic() + delay >= deadline:
                break  # the next attempt could not start within the budget
            if delay > 0:
                waited = self._sleep(delay)
                if inspect.isawaitable(waited):
                    await waited
            attempt += 1
            self._counters.add(retries=1)
        self._counters.add(failed_calls=1)
        why = last.message if last is not None else "the time budget was used up waiting for a slot"
        log.warning("%s: %s gave no usable reply after %d attempt(s) (%s); counted as a failed call",
                    kind, self.config.base_url, attempt + 1, why)
        return Completion("", Usage(self._count(prompt), 0, failed=1))

    def _backoff(self, attempt: int, retry_after: float) -> float:
        base = self.config.backoff_s * 2.0**attempt
        jittered = base * (0.5 + 0.5 * self._rng.random())
        return min(MAX_BACKOFF_S, max(jittered, retry_after))

    async def _attempt(self, kind: str, prompt: str, sample: int, timeout: float) -> Completion | _Fault:
        """One HTTP attempt: the reply, or the fault it ended in."""
        import openai

        client, _ = self._client()
        cfg = self.config
        body = self.request_body(prompt, sample)
        extra: dict[str, Any] = {}
        if not cfg.api_key:
            extra["extra_headers"] = {"Authorization": openai.Omit()}
        t0 = time.monotonic()
        self._counters.enter()
        try:
            async with asyncio.timeout(timeout):
                raw = await client.chat.completions.with_raw_response.create(**body, timeout=timeout, **extra)
            payload = raw.http_response.content
        except (openai.APITimeoutError, TimeoutError):
            return _Fault("timeout", f"no reply within {timeout:.3g} s")
        except openai.APIStatusError as e:
            self._note_slow(t0)
            return self._status_fault(kind, e)
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            return _Fault("reset", f"connection failed: {type(cause).__name__}: {cause}")
        finally:
            self._counters.leave()
        self._note_slow(t0)
        return self._parse(payload, prompt)

    def _note_slow(self, t0: float) -> None:
        if time.monotonic() - t0 >= self.config.slow_s:
            self._counters.add(slow=1)

    def _status_fault(self, kind: str, e: Any) -> _Fault:
        status = int(e.status_code)
        detail = _error_detail(e)
        if status == 429:
            return _Fault("http_429", f"HTTP 429: {detail}", _retry_after(e.response.headers))
        if status >= 500:
            return _Fault("http_5xx", f"HTTP {status}: {detail}", _retry_after(e.response.headers))
        if status in RETRY_STATUSES:
            return _Fault("http_other", f"HTTP {status}: {detail}", _retry_after(e.response.headers))
        if status == 413 or (status == 400 and _TOO_LONG.search(detail)):
            return _Fault("http_other", f"HTTP {status} (prompt too long): {detail}", retry=False)
        hint = {401: " (check the API key)", 403: " (check the API key's permissions)",
                404: f" (check the base URL and the model name {self.config.model!r})"}.get(status, "")
        raise LLMError(f"{kind}: {self.config.base_url}/chat/completions answered HTTP {status}{hint}: {detail}",
                       status)

    def _parse(self, payload: bytes, prompt: str) -> Completion | _Fault:
        try:
            data = json.loads(payload)
        except (UnicodeDecodeError, ValueError):
            return _Fault("not_json", f"reply is not JSON: {_snippet(payload)}")
        if not isinstance(data, dict):
            return _Fault("bad_shape", f"reply is not a JSON object: {_snippet(payload)}")
        choices = data.get("choices")
        if choices is None or choices == []:
            return _Fault("empty_choices", f"reply has no choices: {_snippet(payload)}")
        if not isinstance(choices, list) or not isinstance(choices[0], dict):
            return _Fault("bad_shape", f"reply's choices are not a list of objects: {_snippet(payload)}")
        first = choices[0]
        message = first.get("message")
        if message is not None and not isinstance(message, dict):
            return _Fault("bad_shape", f"reply's message is not an object: {_snippet(payload)}")
        text = message.get("content") if isinstance(message, dict) else first.get("text")
        if text is None:
            return _Fault("null_content", f"reply has no message content: {_snippet(payload)}")
        if not isinstance(text, str):
            return _Fault("bad_shape", f"reply's content is a {type(text).__name__}, not text: {_snippet(payload)}")
        clean = sanitize_reply(text, self.config.max_reply_chars)
        usage = self._usage(data.get("usage"), prompt, clean.text)
        self._counters.add(ok=1, sanitised=int(clean.altered), truncated=int(clean.truncated),
                           prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)
        return Completion(clean.text, usage)

    def _usage(self, reported: object, prompt: str, text: str) -> Usage:
        """The server's usage where it reports it sanely, counted client-side otherwise (per field)."""
        rep = reported if isinstance(reported, dict) else {}

        def pick(key: str, fallback: str) -> int:
            v = rep.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                return v
            return int(self._count(fallback))

        return Usage(pick("prompt_tokens", prompt), pick("completion_tokens", text))


def sample_seed(seed: int, sample: int) -> int:
    """The ``seed`` sent for sample ``sample`` of a prompt: ``seed`` itself for sample 0, else a
    stable 31-bit hash of ``(seed, sample)`` (every server accepts it as an integer seed)."""
    if sample == 0:
        return seed
    digest = hashlib.sha256(f"{seed}:{sample}".encode("ascii")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _snippet(raw: bytes | str, n: int = 300) -> str:
    s = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    s = " ".join(s[: 4 * n].split())
    return s if len(s) <= n else s[:n] + " …"


def _error_detail(e: Any) -> str:
    """The server's error message of an SDK status error, else a snippet of the body."""
    body = getattr(e, "body", None)
    msg: object = None
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
    if isinstance(msg, str) and msg:
        return _snippet(msg)
    try:
        return _snippet(e.response.content) or str(e.message)
    except Exception:  # noqa: BLE001 - the body is only decoration
        return str(getattr(e, "message", e))


def _retry_after(headers: Any) -> float:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date); 0 if none or bad."""
    if headers is None:
        return 0.0
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            v = float(ms) / 1000.0
            if v >= 0 and v == v:
                return v
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return 0.0
    try:
        v = float(ra)
        return v if v >= 0 and v == v else 0.0
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return 0.0
    if when is None:
        return 0.0
    return max(0.0, when.timestamp() - time.time())
