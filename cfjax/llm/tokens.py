"""Exact token counts from a local Hugging Face tokenizer, and offline loading of local models.

:func:`hf_token_counter` loads the tokenizer saved in a local directory (the
one ``save_pretrained`` writes, or a downloaded model's folder) and returns a
:class:`TokenCounter`: called on a string it gives the exact number of tokens
that tokenizer produces for it. The OpenAI-compatible client uses it when the
user names the served model's tokenizer (``--tokenizer PATH``) and the server
reports no ``usage``, instead of the estimate
:func:`cfjax.llm.prompts.count_tokens`; :meth:`TokenCounter.chat_prompt`
counts a prompt the way a chat server does, through the tokenizer's chat
template as one user message.

Nothing is ever downloaded: the path must be an existing local directory
(:func:`check_model_dir` says what is missing otherwise), every load passes
``local_files_only=True`` and runs with ``HF_HUB_OFFLINE=1`` and
``TRANSFORMERS_OFFLINE=1``. This module needs only ``transformers`` (no
``torch``); the local-model backbone :mod:`cfjax.llm.hf` builds on it.

Example:
    >>> count = hf_token_counter("/models/Qwen2.5-7B-Instruct")  # doctest: +SKIP
    >>> count("SELECT name FROM employees")  # doctest: +SKIP
    5
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cfjax.infra.io import InputError

__all__ = ["HFModelError", "TokenCounter", "hf_token_counter", "check_model_dir", "load_tokenizer",
           "offline_hub", "TOKENIZER_FILES", "WEIGHT_SUFFIXES"]

#: Files of which a tokenizer directory has at least one.
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json",
                                    "vocab.txt", "spiece.model", "sentencepiece.bpe.model")

#: Suffixes of model weight files (a model directory has at least one such file).
WEIGHT_SUFFIXES: tuple[str, ...] = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")

_ENV_LOCK = threading.Lock()
_SURROGATES = re.compile("[\ud800-\udfff]")


class HFModelError(InputError):
    """A local model or tokenizer directory that cannot be used (missing, not a directory, or
    without the files a model needs). The message names the path and what is missing."""


def check_model_dir(path: str | os.PathLike[str], *, model: bool = True) -> Path:
    """The absolute path of a usable local model (or tokenizer) directory.

    Args:
      path: the directory (``~`` is expanded).
      model: also require ``config.json`` and a weight file (``False``: a tokenizer is enough).

    Returns:
      The absolute path.

    Raises:
      HFModelError: ``path`` is empty, does not exist, is not a directory, or lacks
        ``config.json``, tokenizer files (:data:`TOKENIZER_FILES`) or weight files
        (:data:`WEIGHT_SUFFIXES`); the message says which. Nothing is downloaded: a hub
        model id such as ``"Qwen/Qwen2.5-7B"`` is refused like any missing directory.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise HFModelError(f"a local model directory is needed, got {path!r}")
    p = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    what = "model" if model else "tokenizer"
    hint = ("(a directory written by save_pretrained, or a downloaded model's folder; "
            "cfjax never downloads a model)")
    if not p.exists():
        raise HFModelError(f"{what} path {str(p)!r} does not exist {hint}")
    if not p.is_dir():
        raise HFModelError(f"{what} path {str(p)!r} is not a directory {hint}")
    names = {e.name for e in os.scandir(p) if e.is_file()}
    if model and "config.json" not in names:
        raise HFModelError(f"model directory {str(p)!r} has no config.json: it is not a transformers model {hint}")
    if not names.intersection(TOKENIZER_FILES):
        raise HFModelError(f"{what} directory {str(p)!r} has no tokenizer files (none of "
                           f"{', '.join(TOKENIZER_FILES)}) {hint}")
    if model and not any(n.endswith(WEIGHT_SUFFIXES) for n in names):
        raise HFModelError(f"model directory {str(p)!r} has no weight files (*{', *'.join(WEIGHT_SUFFIXES)}) {hint}")
    return p


@contextlib.contextmanager
def offline_hub() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` (and no progress bars) for the duration.

    The previous environment values and progress-bar setting are restored afterwards. Loads
    also pass ``local_files_only=True``, so the hub is never contacted even where a library
    read the environment once at import time.
    """
    from transformers.utils import logging as hf_logging

    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    with _ENV_LOCK:
        old = {k: os.environ.get(k) for k in keys}
        bars = hf_logging.is_progress_bar_enabled()
        try:
            for k in keys:
                os.environ[k] = "1"
            hf_logging.disable_progress_bar()
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if bars:
                hf_logging.enable_progress_bar()


def load_tokenizer(path: str | os.PathLike[str], *, model: bool = False) -> Any:
    """``AutoTokenizer.from_pretrained(path, local_files_only=True)`` after :func:`check_model_dir`.

    Raises:
      HFModelError: see :func:`check_model_dir`, or the tokenizer files do not load.
    """
    from transformers import AutoTokenizer

    p = check_model_dir(path, model=model)
    with offline_hub():
        try:
            return AutoTokenizer.from_pretrained(str(p), local_files_only=True)
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001 - malformed tokenizer files of any kind: one clear error
            raise HFModelError(f"the tokenizer in {str(p)!r} does not load: {' '.join(str(e).split())}") from e


def chat_input_ids(tokenizer: Any, prompt: str) -> tuple[list[int], bool]:
    """The token ids a chat model reads for ``prompt`` as one user message.

    Renders the tokenizer's chat template with ``add_generation_prompt=True`` and encodes the
    result without adding special tokens again (the template writes them). A tokenizer without a
    chat template encodes the raw prompt with its usual special tokens.

    Returns:
      ``(ids, templated)``: the ids, and whether the chat template was used.
    """
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]), True
    return list(tokenizer(prompt)["input_ids"]), False


class TokenCounter:
    """Exact token counts of one local tokenizer; thread safe (calls are serialised).

    Calling it counts a text's tokens without special tokens (a completion);
    :meth:`chat_prompt` counts a prompt as a chat server reads it. A lone surrogate (which no
    tokenizer accepts) is counted as U+FFFD.

    Attributes:
      path: the tokenizer directory (absolute).
      has_chat_template: whether the tokenizer defines a chat template.
    """

    def __init__(self, tokenizer: Any, path: str) -> None:
        self._tok = tokenizer
        self.path = path
        self.has_chat_template = bool(getattr(tokenizer, "chat_template", None))
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        """The number of tokens of ``text`` (no special tokens added)."""
        if not isinstance(text, str):
            raise TypeError(f"a token count needs a str, got {type(text).__name__}")
        with self._lock:
            return len(self._tok(_SURROGATES.sub("\ufffd", text), add_special_tokens=False)["input_ids"])

    def chat_prompt(self, prompt: str) -> int:
        """The number of tokens a chat server reads for ``prompt`` sent as one user message
        (the chat template with the generation prompt; the raw prompt with the tokenizer's
        special tokens when there is no template)."""
        if not isinstance(prompt, str):
            raise TypeError(f"a token count needs a str, got {type(prompt).__name__}")
        with self._lock:
            return len(chat_input_ids(self._tok, _SURROGATES.sub("\ufffd", prompt))[0])

    def __repr__(self) -> str:
        return f"TokenCounter({self.path!r})"


def hf_token_counter(path: str | os.PathLike[str]) -> TokenCounter:
    """An exact token counter (``Callable[[str], int]``) for the tokenizer saved in ``path``.

    Args:
      path: a local directory with tokenizer files (a model directory works too).

    Returns:
      A :class:`TokenCounter`.

    Raises:
      HFModelError: the directory is missing or has no loadable tokenizer (nothing is downloaded).
    """
    p = check_model_dir(path, model=False)
    return TokenCounter(load_tokenizer(p), str(p))
