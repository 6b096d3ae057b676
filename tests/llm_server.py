"""A tiny loopback OpenAI-compatible chat-completions server for tests.

It binds ``127.0.0.1`` on an ephemeral port, serves from a daemon thread
only while its context is open, answers ``POST /v1/chat/completions`` (and
``/chat/completions``) with a canned reply chosen by a user function of the
prompt, records every request, can fail the first N requests with a chosen
status, and reports ``usage``.

Realistic load and faults: ``latency_s`` delays every chat request; a
:class:`FaultPlan` injects, per request and deterministically, the faults real
servers produce (empty ``choices``, a body that is not JSON, a null content, a
lone surrogate, 429 with ``Retry-After``, bursts of 500, connection resets,
stalls, 1 MB replies). The server records which fault each request got
(:attr:`FakeLLMServer.faults`) and how many requests were in flight
(:attr:`FakeLLMServer.max_inflight`, per-request start and end times), and it
serves well over 64 concurrent requests (one thread per connection).

Example:
    >>> with FakeLLMServer(lambda prompt: "ACTION: SELECT 1") as srv:  # doctest: +SKIP
    ...     cfg = OpenAIConfig(base_url=srv.base_url, model=srv.model)
    >>> plan = FaultPlan(rate=0.05, seed=0, stall_s=(0.2, 0.3))  # doctest: +SKIP
    >>> with FakeLLMServer(responder, faults=plan, latency_s=0.2) as srv:  # doctest: +SKIP
    ...     ...; srv.faults, srv.max_inflight
"""

from __future__ import annotations

import json
import re
import random
import socket
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["canned_sql", "inflight_profile", "FakeLLMServer", "FaultPlan", "FAULT_KINDS", "RecordedRequest", "Reply", "server_usage"]

#: Every fault a :class:`FaultPlan` can inject.
FAULT_KINDS = ("empty_choices", "not_json", "null_content", "surrogate", "http_429", "http_500_burst", "reset",
               "stall", "huge")


@dataclass(frozen=True)
class FaultPlan:
    """Which chat requests get which fault: a deterministic function of the request's arrival index.

    Request ``i`` gets a fault with probability ``rate``, its kind drawn
    uniformly from ``kinds``, both from ``random.Random(f"{seed}:{i}")``; so
    the same plan injects the same faults at the same indices in every run
    (which *call* lands on an index depends on arrival order under concurrency).

    Attributes:
      rate: the probability that a request gets a fault (1.0 = every request).
      kinds: the faults to draw from (:data:`FAULT_KINDS`):

        - ``empty_choices``: ``{"choices": []}``;
        - ``not_json``: an HTML error page with status 200;
        - ``null_content``: a message whose ``content`` is ``null``;
        - ``surrogate``: the good reply followed by a line holding a lone
          ``\\ud800`` JSON escape;
        - ``http_429``: status 429 with ``Retry-After: retry_after_s`` (or
          ``retry-after-ms: retry_after_ms`` when that is set);
        - ``http_500_burst``: this request and the next ``burst - 1`` requests
          (in arrival order) get status 500;
        - ``reset``: the socket is closed without any response;
        - ``stall``: wait a time drawn uniformly from ``stall_s``, then answer well;
        - ``huge``: the good reply padded to ``huge_chars`` characters.
      seed: the plan's seed.
      retry_after_s: the ``Retry-After`` value of a 429, in seconds (a string is sent verbatim, e.g. an HTTP date).
      retry_after_ms: when set, a 429 carries ``retry-after-ms`` instead.
      burst: the length of a 500 burst.
      stall_s: ``(low, high)`` seconds of a stall.
      huge_chars: the length of a huge reply's content.
      at: request indices that get a fault whatever ``rate`` says (tests: ``rate=0, at=(0,)``
        faults only the first request, so its retry succeeds).
    """

    rate: float = 0.05
    kinds: tuple[str, ...] = FAULT_KINDS
    seed: int = 0
    retry_after_s: float | str = 1
    retry_after_ms: float | None = None
    burst: int = 3
    stall_s: tuple[float, float] = (2.0, 5.0)
    huge_chars: int = 1 << 20
    at: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(FAULT_KINDS))
        if unknown or not self.kinds:
            raise ValueError(f"unknown fault kind(s) {unknown}; choose from {FAULT_KINDS}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {self.rate}")
        if self.burst < 1 or not 0 <= self.stall_s[0] <= self.stall_s[1]:
            raise ValueError("burst must be >= 1 and stall_s a (low, high) pair with 0 <= low <= high")

    def choose(self, index: int) -> str | None:
        """The fault of the ``index``-th chat request, or ``None``."""
        rng = random.Random(f"{self.seed}:{index}")
        if rng.random() >= self.rate and index not in self.at:
            return None
        return self.kinds[rng.randrange(len(self.kinds))]

    def stall_of(self, index: int) -> float:
        """The stall, in seconds, of the ``index``-th request (when it stalls)."""
        return random.Random(f"{self.seed}:{index}:stall").uniform(*self.stall_s)

#: What a responder returns: the reply text; a dict sent verbatim as the JSON
#: body (malformed replies); or bytes sent verbatim (non-JSON bodies).
Reply = str | dict | bytes


def server_usage(prompt: str, reply: str) -> dict[str, int]:
    """The usage the server reports: characters, not tokens.

    Deliberately different from ``prompts.count_tokens`` so tests can tell a
    server-reported usage from a client-side estimate.
    """
    return {"prompt_tokens": len(prompt), "completion_tokens": len(reply), "total_tokens": len(prompt) + len(reply)}


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
      method: ``"GET"`` or ``"POST"``.
      path: the request path.
      headers: the request headers (names lower-cased).
      body: the decoded JSON body (``None`` when absent or not JSON).
      status: the status the server answered with (0: the connection was reset, no response).
      fault: the injected fault (:data:`FAULT_KINDS`, ``"fail_first"``) or ``None``.
      index: the arrival index among chat requests (-1 for other requests).
      start: ``time.monotonic()`` when the request's handling began.
      end: ``time.monotonic()`` when its response was sent.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int
    fault: str | None = None
    index: int = -1
    start: float = 0.0
    end: float = 0.0

    @property
    def prompt(self) -> str:
        """The concatenated ``user`` message contents ("" when none)."""
        return _prompt_of(self.body)


def _prompt_of(body: Any) -> str:
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return ""
    parts = [m.get("content", "") for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]
    return "\n".join(p for p in parts if isinstance(p, str))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # concurrent clients are not kept waiting on a full backlog

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hung up first (the timeout tests do) or a reset was injected."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            super().handle_error(request, client_address)


@dataclass
class FakeLLMServer:
    """Context manager running the loopback server.

    Args:
      responder: maps the prompt to a :data:`Reply`; the default echoes
        ``"ok"``.
      fail_first: how many of the first chat requests are answered with
        ``fail_status`` instead of a reply.
      fail_status: the status of those failures (500, 429, 400, ...);
        a 429 carries ``Retry-After: 0``.
      fail_message: the error message of those failures (default ``"injected failure <status>"``).
      report_usage: include :func:`server_usage` in replies.
      delay_s: wait this long before answering each chat request (timeouts).
      latency_s: a further fixed wait before answering each chat request
        (a server's latency; throughput benchmarks).
      faults: the :class:`FaultPlan` of injected faults (``None``: none).
      model: the model name ``/v1/models`` lists.

    Attributes:
      requests: every request received, in the order their handling ended.
      base_url: ``http://127.0.0.1:<port>/v1`` (only while open).
      faults_injected: how many chat requests got each fault (a ``Counter``).
      max_inflight: the most chat requests in flight at once.
    """

    responder: Callable[[str], Reply] = lambda prompt: "ok"
    fail_first: int = 0
    fail_status: int = 500
    fail_message: str | None = None
    report_usage: bool = True
    delay_s: float = 0.0
    latency_s: float = 0.0
    faults: FaultPlan | None = None
    model: str = "fake-model"
    requests: list[RecordedRequest] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._failed = 0
        self._index = 0  # arrival index of the next chat request
        self._burst_left = 0
        self._inflight = 0
        self.max_inflight = 0
        self.faults_injected: Counter[str] = Counter()
        self._conns: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> "FakeLLMServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a stuck client cannot pin a handler thread forever
            # keep-alive: a pooled client reuses its connections, as against a real server (vLLM,
            # llama.cpp), instead of paying a TCP handshake and a handler thread per request
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms delayed-ACK stall)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._conns.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._conns.discard(self.connection)
                super().finish()

            def do_GET(self) -> None:  # noqa: N802
                self._t0, self._index, self._fault = time.monotonic(), -1, None
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]}, None)
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, None)

            def do_POST(self) -> None:  # noqa: N802
                self._t0, self._index, self._fault = time.monotonic(), -1, None
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, body)
                    return
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    self._send(400, {"error": {"message": "body must be JSON with a messages list"}}, body)
                    return
                with server._lock:
                    self._index = server._index
                    server._index += 1
                    server._inflight += 1
                    server.max_inflight = max(server.max_inflight, server._inflight)
                    fail = server._failed < server.fail_first
                    if fail:
                        server._failed += 1
                        fault: str | None = "fail_first"
                    elif server._burst_left > 0:
                        server._burst_left -= 1
                        fault = "http_500_burst"
                    else:
                        fault = server.faults.choose(self._index) if server.faults is not None else None
                        if fault == "http_500_burst":
                            server._burst_left = server.faults.burst - 1  # type: ignore[union-attr]
                    if fault not in (None, "fail_first"):
                        server.faults_injected[fault] += 1
                self._fault = fault
                self._counted = True
                try:
                    self._chat(body, fault)
                finally:
                    self._leave()

            def _leave(self) -> None:
                """This chat request is no longer in flight (once; before its response is written, so the
                server never counts a request the client already considers finished)."""
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server._inflight -= 1

            def _chat(self, body: dict, fault: str | None) -> None:
                plan = server.faults
                wait = server.delay_s + server.latency_s
                if fault == "stall":
                    wait += plan.stall_of(self._index)  # type: ignore[union-attr]
                if wait:
                    time.sleep(wait)
                if fault == "fail_first":
                    status = server.fail_status
                    extra = {"Retry-After": "0"} if status == 429 else {}
                    message = server.fail_message or f"injected failure {status}"
                    self._send(status, {"error": {"message": message}}, body, extra)
                    return
                if fault == "reset":
                    self._record(0, body)
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if fault == "http_429":
                    assert plan is not None
                    extra = ({"retry-after-ms": f"{plan.retry_after_ms:g}"} if plan.retry_after_ms is not None
                             else {"Retry-After": str(plan.retry_after_s)})
                    self._send(429, {"error": {"message": "injected rate limit"}}, body, extra)
                    return
                if fault == "http_500_burst":
                    self._send(500, {"error": {"message": "injected 500 burst"}}, body)
                    return
                if fault == "not_json":
                    self._send(200, b"<html><body>502 Bad Gateway</body></html>", body)
                    return
                if fault == "empty_choices":
                    self._send(200, {"id": "x", "object": "chat.completion", "choices": []}, body)
                    return
                if fault == "null_content":
                    self._send(200, {"id": "x", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]},
                        body)
                    return
                prompt = _prompt_of(body)
                reply = server.responder(prompt)
                if isinstance(reply, (bytes, dict)):
                    self._send(200, reply, body)
                    return
                if fault == "surrogate":
                    reply = reply + "\n\ud800"  # json.dumps writes the lone surrogate as a \ud800 escape
                elif fault == "huge":
                    assert plan is not None
                    reply = reply + "\n" + "x" * max(0, plan.huge_chars - len(reply) - 1)
                out: dict[str, Any] = {
                    "id": f"chatcmpl-{self._index}",
                    "object": "chat.completion",
                    "model": body.get("model", server.model),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                    ],
                }
                if server.report_usage:
                    out["usage"] = server_usage(prompt, reply)
                self._send(200, out, body)

            def _record(self, status: int, body: Any) -> None:
                self._leave()
                with server._lock:
                    server.requests.append(
                        RecordedRequest(
                            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, status,
                            self._fault, self._index, self._t0, time.monotonic(),
                        )
                    )

            def _send(self, status: int, payload: Any, body: Any, extra: dict[str, str] | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self._record(status, body)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:  # kept-alive connections end with the context too
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    # -- accessors -----------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (only while open)."""
        if self._httpd is None:
            raise RuntimeError("server is not running; use it as a context manager")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def prompts(self) -> list[str]:
        """The prompts of all chat requests received, in order."""
        with self._lock:
            return [r.prompt for r in sorted(self.requests, key=_arrival) if r.method == "POST"]

    @property
    def arrived(self) -> int:
        """How many chat requests have arrived (a request is recorded only when its handler answers)."""
        with self._lock:
            return self._index

    def settle(self, timeout_s: float = 5.0) -> None:
        """Wait until every chat request that arrived is recorded: a stalled handler whose client gave up
        (and retried) records its request only when the stall ends, after the client's call returned."""
        deadline = time.monotonic() + timeout_s
        while len(self.chat_requests) < self.arrived and time.monotonic() < deadline:
            time.sleep(0.01)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat requests (those with an arrival index), in arrival order."""
        with self._lock:
            return sorted((r for r in self.requests if r.index >= 0), key=_arrival)

    def inflight_profile(self) -> dict[str, float]:
        """How many chat requests were in flight: ``max``, the time-weighted ``mean`` while at least one
        was, ``busy_s`` (seconds with at least one) and ``n`` (requests), from the recorded start/end times."""
        return inflight_profile(self.chat_requests)

    def fail_next(self, n: int, status: int = 500) -> None:
        """Answer the next ``n`` chat requests with ``status``."""
        with self._lock:
            self.fail_first = self._failed + n
            self.fail_status = status


def inflight_profile(reqs: list[RecordedRequest]) -> dict[str, float]:
    """``max`` / time-weighted ``mean`` (while ≥ 1) requests in flight, ``busy_s`` and ``n`` over ``reqs``."""
    events = sorted([(r.start, 1) for r in reqs] + [(r.end, -1) for r in reqs])
    level = peak = 0
    area = busy = 0.0
    last = events[0][0] if events else 0.0
    for t, d in events:
        if level:
            area += level * (t - last)
            busy += t - last
        level += d
        peak = max(peak, level)
        last = t
    return {"max": float(peak), "mean": area / busy if busy else 0.0, "busy_s": busy, "n": float(len(reqs))}


def _arrival(r: RecordedRequest) -> tuple[int, float]:
    return (r.index if r.index >= 0 else 1 << 62, r.start)


def canned_sql(suite, *, slip: Callable[[str], bool] | None = None,
               judge: Callable[[str], str] | None = None):
    """A responder for every App. D.8 prompt of a built-in SQL ``suite`` (benchmarks, end-to-end tests).

    Not a model: a draft is the task's gold query (looked up by the question; this is the fake
    *server*, not agent-side code) or its boundary slip (``>=`` written ``>``) when ``slip(prompt)``
    (default: a third of the prompts, by hash); corrections repair the slip; the judge's reply is
    ``judge(prompt)`` (default: ``CHOICE: 1`` or ``2`` by hash); lessons and records are fixed text.
    It shapes how many calls an episode makes, not what the transport does."""
    by_q = {t.question: t for t in suite.tasks}
    slip = slip or (lambda prompt: zlib.crc32(prompt.encode()) % 3 == 0)
    judge = judge or (lambda prompt: f"CHOICE: {1 + zlib.crc32(prompt.encode()) % 2}")

    def task_of(prompt: str):
        m = re.search(r"### Task\n(.*?)\n\n", prompt, re.S)
        return by_q.get(m.group(1)) if m else None

    def reply(prompt: str) -> str:
        if "Propose at most" in prompt:
            units = re.findall(r"^\[(\d+)\] (.*)$", prompt, re.M)
            return "\n".join(f"EDIT: REPLACE [{i}] WITH {u.replace(' > ', ' >= ')}" for i, u in units
                             if " > " in u) or "EDIT: REPLACE [0] WITH SELECT *"
        if "Distil the checked contrast" in prompt:
            return 'SITUATION: an inclusive bound was written as strict\nCONDITION: boundary = "inclusive"'
        if "A stored correction from an earlier task" in prompt or "LESSON (from an earlier task" in prompt:
            m = re.search(r"### Draft action\n(.*?)\n\n###", prompt, re.S)
            return f"ACTION:\n```sql\n{(m.group(1) if m else 'SELECT 1').replace(' > ', ' >= ')}\n```"
        if "Choose exactly one candidate" in prompt:
            return judge(prompt)
        if "Extract one transferable lesson" in prompt:
            return "LESSON: inclusive bounds need >=\nEDIT: a > 1 -> a >= 1"
        t = task_of(prompt)
        gold = suite.keys[t.task_id].gold if t is not None else "SELECT 1"
        return f"ACTION:\n```sql\n{gold.replace(' >= ', ' > ') if slip(prompt) else gold}\n```"

    return reply
