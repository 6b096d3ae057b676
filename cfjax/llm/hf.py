"""A :class:`~cfjax.llm.base.TextBackbone` on a local transformers model (``--backbone hf:PATH``).

:class:`HFBackbone` loads ``AutoTokenizer`` and ``AutoModelForCausalLM`` from a
local directory (``local_files_only=True`` under ``HF_HUB_OFFLINE=1``: nothing
is ever downloaded) and answers the shared prompts of :mod:`cfjax.llm.prompts`
like every other backbone.

**Prompts.** Each prompt is sent as one user message through the tokenizer's
chat template (``add_generation_prompt=True``). A tokenizer without a chat
template gets the raw prompt with its usual special tokens instead; this is
recorded in :attr:`HFBackbone.uses_chat_template`, in :meth:`HFBackbone.stats`
(``chat_template``) and in :meth:`HFBackbone.cache_identity`, and a warning
is issued once at load time.

**Exact token counts.** ``prompt_tokens`` is the length of the ids the model
reads (the chat-templated input); ``completion_tokens`` counts the generated
ids up to and including the first end-of-sequence id (the model's
``generation_config.eos_token_id``, one or several, and the tokenizer's EOS),
never the padding after it. The reply text is the generated ids before the
EOS, decoded with ``skip_special_tokens=True`` and cleaned like every reply
(:func:`cfjax.llm.sanitize.clean_text`: line ends, control characters); a lone
surrogate in a prompt is replaced by U+FFFD before tokenisation.

**Batching.** Callers are synchronous and may come from many threads (the
held-out evaluation runs episodes in a thread pool). A daemon worker thread
collects up to ``batch_size`` pending requests, waiting at most
``batch_wait_ms`` for more after the first, left-pads them with an attention
mask and runs one ``generate``; each caller receives its own completion. The
thread never keeps the interpreter alive; :meth:`HFBackbone.close` (or the
backbone being garbage collected) stops it.

**Decoding.** ``temperature == 0`` is greedy. Otherwise every request is
sampled (temperature, then nucleus ``top_p``) with its *own*
``torch.Generator``, seeded from ``(seed, prompt, sample index)``, inside a
logits processor that draws one token per row; ``generate`` itself then runs
greedily over the drawn tokens. So neither greedy nor sampled replies depend
on which other requests share the batch, or on completion order (up to the
floating-point differences of different batch shapes, which do not change
the argmax or the draw in float32 on the models tested). The model's own
``generation_config`` sampling defaults (temperature, top-k, repetition
penalty, …) are ignored (only its ``eos_token_id`` is read): :class:`HFConfig`
alone decides, so the cache identity is complete.

**Prompt length.** A prompt longer than ``max_prompt_tokens`` (by default the
model's ``max_position_embeddings`` minus ``max_new_tokens``, when the config
has one) is not generated: the call returns an empty reply with
``Usage(failed=1)`` (the ledger counts a failed LLM call, the parsers yield an
empty result) and :meth:`HFBackbone.stats` counts it under ``too_long``.

torch is an optional extra (``pip install 'cfjax[hf]'``); :class:`HFConfig`
imports without it, so a run's recipe can be built and pickled anywhere.

Example:
    >>> backbone = HFBackbone(HFConfig("/models/Qwen2.5-0.5B-Instruct", max_new_tokens=256))  # doctest: +SKIP
    >>> from cfjax.llm.calls import DRAFT_ACTION  # doctest: +SKIP
    >>> backbone.call(DRAFT_ACTION, DraftRequest(task)).action  # doctest: +SKIP
    >>> backbone.stats()["mean_batch"]  # doctest: +SKIP
    >>> backbone.close()  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import math
import os
import queue
import re
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

from cfjax.infra.io import UserError
from cfjax.llm.base import Completion, TextBackbone, Usage
from cfjax.llm.sanitize import clean_text
from cfjax.llm.tokens import (WEIGHT_SUFFIXES, HFModelError, chat_input_ids, check_model_dir, load_tokenizer,
                              offline_hub)

__all__ = ["HFConfig", "HFBackbone", "HFModelError", "HFDependencyError", "DTYPES", "request_seed"]

#: Accepted ``HFConfig.dtype`` values (``"auto"``: the dtype stored in the model's config).
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16", "auto")

_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")
_SURROGATES = re.compile("[\ud800-\udfff]")


class HFDependencyError(UserError, ImportError):
    """torch (the ``hf`` extra) is not installed."""


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class HFConfig:
    """Model, decoding and batching settings of an :class:`HFBackbone` (frozen and picklable).

    Attributes:
      path: the local model directory (``save_pretrained`` output or a downloaded model's folder);
        made absolute. It must hold ``config.json``, tokenizer files and weight files.
      seed: seeds sampled decoding (per request, with the prompt; unused when greedy).
      temperature: 0 = greedy; > 0 = sampling at this temperature.
      top_p: nucleus sampling mass in (0, 1] (1 = off; sampling only).
      max_new_tokens: completion token limit per call.
      batch_size: the most requests one ``generate`` serves.
      batch_wait_ms: how long the batcher waits for more requests after the first of a batch.
      dtype: the weights' dtype, one of :data:`DTYPES`.
      torch_threads: ``torch.set_num_threads`` for this process (``None``: torch's default).
        The setting is process wide.
      max_prompt_tokens: longer prompts are not generated (a failed call, see the module
        docstring); ``None``: the model's ``max_position_embeddings − max_new_tokens`` when known.
      device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.

    Raises:
      HFModelError: ``path`` is missing, not a directory, or not a model directory (the message
        says what is missing; nothing is downloaded).
      ValueError: a setting is out of range.
    """

    path: str
    seed: int = 0
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 8
    batch_wait_ms: float = 5.0
    dtype: str = "float32"
    torch_threads: int | None = None
    max_prompt_tokens: int | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", str(check_model_dir(self.path, model=True)))
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        for name in ("temperature", "top_p", "batch_wait_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.batch_wait_ms < 0:
            raise ValueError(f"batch_wait_ms must be >= 0, got {self.batch_wait_ms}")
        for name in ("max_new_tokens", "batch_size"):
            v = getattr(self, name)
            if not _is_int(v) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("torch_threads", "max_prompt_tokens"):
            v = getattr(self, name)
            if v is not None and (not _is_int(v) or v < 1):
                raise ValueError(f"{name} must be None or an integer >= 1, got {v!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not isinstance(self.device, str) or not _DEVICE_RE.match(self.device):
            raise ValueError(f"device must be cpu, cuda, cuda:N or mps, got {self.device!r}")

    @property
    def greedy(self) -> bool:
        """Whether decoding is greedy (``temperature == 0``)."""
        return self.temperature == 0


def request_seed(seed: int, prompt: str, sample: int = 0) -> int:
    """The sampling seed of one request: a stable 63-bit hash of ``(seed, prompt, sample)``.

    ``sample`` is the request's sample index (``DraftRequest.sample``), so independent samples of
    one decision (Best-of-N drafts) differ while a repeated request repeats its reply.
    """
    h = hashlib.blake2b(repr((int(seed), prompt, int(sample))).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(h.digest(), "little") & (2**63 - 1)


def _model_fingerprint(path: str) -> str:
    """A sha256 over the directory's small files (config, generation config, tokenizer, chat
    template: by content) and its weight files (by name, size and modification time)."""
    h = hashlib.sha256()
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if not entry.is_file() or entry.name.startswith("."):
            continue
        st = entry.stat()
        h.update(entry.name.encode("utf-8", "surrogateescape") + b"\0")
        if entry.name.endswith(WEIGHT_SUFFIXES):
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        else:
            with open(entry.path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        h.update(b"\1")
    return h.hexdigest()


@dataclass
class _Request:
    """One pending ``_complete`` call: its prompt, sample index and, once done, its result."""

    prompt: str
    sample: int
    done: threading.Event = field(default_factory=threading.Event)
    result: Completion | None = None
    error: BaseException | None = None


_STOP = object()


class _Counters:
    def __init__(self) -> None:
        self.calls = 0
        self.batches = 0
        self.batched_requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.generate_s = 0.0
        self.too_long = 0
        self.eos_stops = 0


class _Batcher:
    """The worker thread: tokenises, batches, generates and decodes (see the module docstring).

    It holds the model and tokenizer but not the backbone, so a backbone that is garbage
    collected stops its thread (``weakref.finalize``).
    """

    def __init__(self, torch: Any, model: Any, tokenizer: Any, config: HFConfig, *, eos_ids: tuple[int, ...],
                 pad_id: int, max_prompt: int | None, device: Any) -> None:
        self.torch = torch
        self.model = model
        self.tok = tokenizer
        self.config = config
        self.eos_ids = eos_ids
        self.pad_id = pad_id
        self.max_prompt = max_prompt
        self.device = device
        self.counters = _Counters()
        self.lock = threading.Lock()
        self.queue: queue.Queue = queue.Queue()
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name="cfjax-hf-batcher", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ caller side
    def submit(self, req: _Request) -> Completion:
        with self.lock:
            if self.closed:
                raise RuntimeError("this HFBackbone is closed")
            self.counters.calls += 1
            self.queue.put(req)
        while not req.done.wait(0.5):
            if not self.thread.is_alive():
                raise RuntimeError("the hf batcher thread stopped before answering")
        if req.error is not None:
            raise RuntimeError(f"hf generation failed: {type(req.error).__name__}: {req.error}") from req.error
        assert req.result is not None
        return req.result

    def close(self, timeout: float = 10.0) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.queue.put(_STOP)
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout)

    # ------------------------------------------------------------------ worker side
    def _loop(self) -> None:
        stop = False
        while not stop:
            first = self.queue.get()
            if first is _STOP:
                break
            batch = [first]
            deadline = time.monotonic() + self.config.batch_wait_ms / 1000.0
            while len(batch) < self.config.batch_size:
                remaining = deadline - time.monotonic()
                try:
                    item = self.queue.get(timeout=remaining) if remaining > 0 else self.queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            try:
                self._run(batch)
            except BaseException as e:  # noqa: BLE001 - handed to every caller of the batch
                for r in batch:
                    if not r.done.is_set():
                        r.error = e
                        r.done.set()
        while True:  # nothing is queued after _STOP (submit and close share the lock); be safe anyway
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                item.error = RuntimeError("this HFBackbone was closed before the request ran")
                item.done.set()

    def _run(self, batch: list[_Request]) -> None:
        torch = self.torch
        ids = []
        live = []
        for r in batch:
            try:
                x, _ = chat_input_ids(self.tok, _SURROGATES.sub("\ufffd", r.prompt))
            except Exception as e:  # noqa: BLE001 - a template that refuses this prompt: this caller's error
                r.error = e
                r.done.set()
                continue
            if self.max_prompt is not None and len(x) > self.max_prompt:
                with self.lock:
                    self.counters.too_long += 1
                r.result = Completion("", Usage(0, 0, failed=1))
                r.done.set()
                continue
            ids.append(x)
            live.append(r)
        if not live:
            return
        width = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, width - len(x):] = torch.tensor(x, dtype=torch.long)
            mask[i, width - len(x):] = 1
        processors = None
        if not self.config.greedy:
            from transformers import LogitsProcessorList

            gens = [torch.Generator().manual_seed(request_seed(self.config.seed, r.prompt, r.sample)) for r in live]
            processors = LogitsProcessorList([_RowSampler(torch, gens, self.config.temperature, self.config.top_p)])
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                      generation_config=self._generation_config(), logits_processor=processors)
        dt = time.perf_counter() - t0
        new = out[:, width:].tolist()
        results = []
        eos = set(self.eos_ids)
        stops = 0
        for x, seq in zip(ids, new):
            n = next((j + 1 for j, t in enumerate(seq) if t in eos), None)
            stops += n is not None
            body = seq[: n - 1] if n is not None else seq
            text = clean_text(self.tok.decode(body, skip_special_tokens=True))
            results.append(Completion(text, Usage(len(x), n if n is not None else len(seq))))
        with self.lock:
            c = self.counters
            c.batches += 1
            c.batched_requests += len(live)
            c.generate_s += dt
            c.eos_stops += stops
            for res in results:
                c.prompt_tokens += res.usage.prompt_tokens
                c.completion_tokens += res.usage.completion_tokens
        for r, res in zip(live, results):
            r.result = res
            r.done.set()

    def _generation_config(self) -> Any:
        from transformers import GenerationConfig

        return GenerationConfig(max_new_tokens=self.config.max_new_tokens, do_sample=False, num_beams=1,
                                eos_token_id=list(self.eos_ids) or None, pad_token_id=self.pad_id)


class _RowSampler:
    """A logits processor that samples each row with its own generator (temperature, then top-p)
    and leaves only the drawn token finite, so that greedy ``generate`` emits it."""

    def __init__(self, torch: Any, generators: list[Any], temperature: float, top_p: float) -> None:
        self.torch = torch
        self.generators = generators
        self.temperature = temperature
        self.top_p = top_p

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        torch = self.torch
        probs = torch.softmax(scores.detach().float().cpu() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
            outside = sorted_p.cumsum(dim=-1) - sorted_p >= self.top_p  # mass before >= p; the first stays
            sorted_p = sorted_p.masked_fill(outside, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        out = torch.full_like(scores, float("-inf"))
        for i, g in enumerate(self.generators):
            k = int(torch.multinomial(probs[i], 1, generator=g).item())
            out[i, k] = 0.0
        return out


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise HFDependencyError("the hf backbone needs torch, an optional extra: pip install 'cfjax[hf]' "
                                f"({e})") from e
    return torch


class HFBackbone(TextBackbone):
    """The CounterMem :class:`~cfjax.llm.base.Backbone` on a local transformers causal LM.

    Args:
      config: the model directory and the decoding and batching settings.

    Attributes:
      name: ``"hf:<directory name>"``.
      config: the settings.
      uses_chat_template: whether prompts go through the tokenizer's chat template (else raw).
      max_prompt_tokens: the prompt length limit in force (``None``: none).

    Raises:
      HFDependencyError: torch is not installed.
      HFModelError: the directory is not a loadable model (nothing is downloaded).
      ValueError: ``config.device`` is not available.
    """

    def __init__(self, config: HFConfig) -> None:
        torch = _import_torch()
        from transformers import AutoModelForCausalLM

        self.config = config
        self.name = f"hf:{os.path.basename(config.path)}"
        if config.torch_threads is not None:
            torch.set_num_threads(config.torch_threads)
        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {config.device!r} was asked for but torch sees no CUDA device")
        if config.device == "mps" and not torch.backends.mps.is_available():
            raise ValueError("device 'mps' was asked for but torch sees no MPS device")
        tokenizer = load_tokenizer(config.path, model=True)
        dtype = "auto" if config.dtype == "auto" else getattr(torch, config.dtype)
        with offline_hub():
            try:
                model = AutoModelForCausalLM.from_pretrained(config.path, local_files_only=True, dtype=dtype)
            except MemoryError:
                raise
            except Exception as e:  # noqa: BLE001 - corrupt weights, unknown architecture, …: one clear error
                raise HFModelError(f"the model in {config.path!r} does not load as a causal LM: "
                                   f"{' '.join(str(e).split())}") from e
        model.to(config.device)
        model.eval()
        tokenizer.padding_side = "left"
        self.uses_chat_template = bool(getattr(tokenizer, "chat_template", None))
        if not self.uses_chat_template:
            warnings.warn(f"the tokenizer in {config.path!r} has no chat template: prompts are sent raw",
                          stacklevel=2)
        eos: list[int] = []
        gen_eos = getattr(model.generation_config, "eos_token_id", None)
        for e in ([gen_eos] if _is_int(gen_eos) else list(gen_eos or [])) + [tokenizer.eos_token_id]:
            if _is_int(e) and e not in eos:
                eos.append(e)
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = getattr(model.generation_config, "pad_token_id", None)
        if pad is None:
            pad = eos[0] if eos else 0  # padding is masked on input and follows EOS on output
        max_pos = getattr(model.config, "max_position_embeddings", None)
        if config.max_prompt_tokens is not None:
            self.max_prompt_tokens: int | None = config.max_prompt_tokens
        elif _is_int(max_pos) and max_pos > config.max_new_tokens:
            self.max_prompt_tokens = max_pos - config.max_new_tokens
        else:
            self.max_prompt_tokens = None
        self.eos_token_ids = tuple(eos)
        self.pad_token_id = int(pad)
        self.tokenizer = tokenizer
        self.model = model
        self._fingerprint = _model_fingerprint(config.path)
        self._versions = {"torch": torch.__version__, "transformers": _transformers_version()}
        self._batcher = _Batcher(torch, model, tokenizer, config, eos_ids=self.eos_token_ids, pad_id=self.pad_token_id,
                                 max_prompt=self.max_prompt_tokens, device=config.device)
        self._finalizer = weakref.finalize(self, self._batcher.close, 0.0)

    def __repr__(self) -> str:
        return f"HFBackbone({self.config!r})"

    def _complete(self, kind: str, prompt: str, req: object) -> Completion:
        """Queue ``prompt`` for the batcher and wait for its completion.

        Args:
          kind: the template name (unused: every template is generated alike).
          prompt: the rendered prompt.
          req: the structured request; only its ``sample`` index is read (it seeds sampling).

        Returns:
          The completion with exact token counts (module docstring).

        Raises:
          RuntimeError: the backbone is closed, or ``generate`` raised (the cause is chained).
        """
        sample = getattr(req, "sample", 0)
        return self._batcher.submit(_Request(prompt, sample if _is_int(sample) else 0))

    def stats(self) -> dict[str, Any]:
        """Counters since construction, JSON-ready (sums, so units' counters add up):

        ``calls`` (``_complete`` calls), ``ok`` and ``failed_calls`` (prompts refused for length,
        also counted as ``too_long``), ``batches`` (``generate`` runs), ``batched_requests``
        (requests they served) and ``mean_batch`` (their ratio), ``prompt_tokens`` and
        ``completion_tokens`` (exact, over generated calls), ``generate_s`` (seconds inside
        ``generate``; also ``busy_s``, the weight a merge of means uses), ``eos_stops`` (replies
        that ended with EOS rather than at ``max_new_tokens``) and ``chat_template``."""
        b = self._batcher
        with b.lock:
            c = b.counters
            return {"calls": c.calls, "ok": c.batched_requests, "failed_calls": c.too_long, "too_long": c.too_long,
                    "batches": c.batches, "batched_requests": c.batched_requests,
                    "mean_batch": c.batched_requests / c.batches if c.batches else 0.0,
                    "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                    "generate_s": c.generate_s, "busy_s": c.generate_s, "eos_stops": c.eos_stops,
                    "chat_template": self.uses_chat_template}

    def cache_identity(self) -> dict[str, Any]:
        """Everything that determines a reply besides the prompt (and, when sampling, the request's
        sample index): ``backend`` (``"hf"``), ``model`` (the directory) and ``model_sha256`` (its
        fingerprint: small files by content, weight files by size and modification time), dtype,
        device, decoding settings, prompt limit, chat-template use and library versions. ``seed``
        and ``top_p`` are ``None`` when greedy (the reply does not depend on them)."""
        c = self.config
        return {"backend": "hf", "model": c.path, "model_sha256": self._fingerprint, "dtype": c.dtype,
                "device": c.device, "temperature": float(c.temperature),
                "top_p": float(c.top_p) if not c.greedy else None, "seed": c.seed if not c.greedy else None,
                "max_new_tokens": c.max_new_tokens, "max_prompt_tokens": self.max_prompt_tokens,
                "chat_template": self.uses_chat_template, **self._versions}

    def close(self) -> None:
        """Stop the batcher thread (waits for the batch in progress). Later calls raise."""
        self._finalizer.detach()
        self._batcher.close()

    def __enter__(self) -> "HFBackbone":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)
