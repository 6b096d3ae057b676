"""A tiny loopback OpenAI-compatible chat-completions server for tests.

It binds ``127.0.0.1`` on an ephemeral port, serves from a daemon thread
only while its context is open, answers ``POST /v1/chat/completions`` (and
``/chat/completions``) with a canned reply chosen by a user function of the
prompt, records every request, can fail the first N requests with a chosen
status, and reports ``usage``.

Example:
    >>> with FakeLLMServer(lambda prompt: "ACTION: SELECT 1") as srv:  # doctest: +SKIP
    ...     cfg = OpenAIConfig(base_url=srv.base_url, model=srv.model)
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLMServer", "RecordedRequest", "Reply", "server_usage"]

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
      status: the status the server answered with.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int

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
        """Stay quiet when a client hung up first (the timeout tests do)."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
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
      report_usage: include :func:`server_usage` in replies.
      delay_s: wait this long before answering each chat request (timeouts).
      model: the model name ``/v1/models`` lists.

    Attributes:
      requests: every request received, in arrival order.
      base_url: ``http://127.0.0.1:<port>/v1`` (only while open).
    """

    responder: Callable[[str], Reply] = lambda prompt: "ok"
    fail_first: int = 0
    fail_status: int = 500
    report_usage: bool = True
    delay_s: float = 0.0
    model: str = "fake-model"
    requests: list[RecordedRequest] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._failed = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> "FakeLLMServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a stuck client cannot pin a handler thread forever

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence
                pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]}, None)
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, None)

            def do_POST(self) -> None:  # noqa: N802
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
                    fail = server._failed < server.fail_first
                    if fail:
                        server._failed += 1
                if server.delay_s:
                    time.sleep(server.delay_s)
                if fail:
                    status = server.fail_status
                    extra = {"Retry-After": "0"} if status == 429 else {}
                    self._send(status, {"error": {"message": f"injected failure {status}"}}, body, extra)
                    return
                prompt = _prompt_of(body)
                reply = server.responder(prompt)
                if isinstance(reply, (bytes, dict)):
                    self._send(200, reply, body)
                    return
                out: dict[str, Any] = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "model": body.get("model", server.model),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                    ],
                }
                if server.report_usage:
                    out["usage"] = server_usage(prompt, reply)
                self._send(200, out, body)

            def _send(self, status: int, payload: Any, body: Any, extra: dict[str, str] | None = None) -> None:
                with server._lock:
                    server.requests.append(
                        RecordedRequest(
                            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, status
                        )
                    )
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
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
            return [r.prompt for r in self.requests if r.method == "POST"]

    def fail_next(self, n: int, status: int = 500) -> None:
        """Answer the next ``n`` chat requests with ``status``."""
        with self._lock:
            self.fail_first = self._failed + n
            self.fail_status = status
