"""Clean model replies at the process boundary.

A reply that reaches the parsers of :mod:`cfjax.llm.prompts`, the ledger or a
stored file must be valid text: real servers now and then return lone UTF-16
surrogates (a JSON ``"\\ud800"`` escape decodes to a Python ``str`` that
cannot be encoded as UTF-8), NUL bytes and other control characters, Windows
line ends, or megabytes of runaway generation. :func:`sanitize_reply` fixes all
of these and says whether it changed anything, so the caller can count it.

Example:
    >>> sanitize_reply("ok\\r\\nA\\x00B\\ud800", max_chars=100)
    SanitizedReply(text='ok\\nAB\\ufffd', altered=True, truncated=False)
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["REPLACEMENT", "SanitizedReply", "sanitize_reply", "clean_text"]

#: What a lone surrogate becomes: U+FFFD, so the reader can see that something was there.
REPLACEMENT = "\ufffd"

_SURROGATES = re.compile("[\ud800-\udfff]")
# C0 controls except \t (0x09) and \n (0x0a); \r is handled before; DEL; C1 controls.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class SanitizedReply(NamedTuple):
    """The result of :func:`sanitize_reply`.

    Attributes:
      text: the cleaned (and possibly truncated) text.
      altered: ``True`` when cleaning changed the text (truncation aside).
      truncated: ``True`` when the text was cut to ``max_chars``.
    """

    text: str
    altered: bool
    truncated: bool


def clean_text(text: str) -> str:
    """``text`` with line ends normalised, lone surrogates replaced and controls removed.

    ``\\r\\n`` and a lone ``\\r`` become ``\\n``; a lone surrogate (U+D800–U+DFFF)
    becomes :data:`REPLACEMENT`; every other C0 control except ``\\n`` and
    ``\\t``, DEL and the C1 controls (U+0080–U+009F) are dropped. Valid
    non-ASCII text (including characters outside the BMP) is unchanged.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _SURROGATES.sub(REPLACEMENT, text)
    return _CONTROLS.sub("", text)


def sanitize_reply(text: str, max_chars: int) -> SanitizedReply:
    """Clean ``text`` (:func:`clean_text`) and cut it to at most ``max_chars`` characters.

    Truncation happens first, so a runaway reply is never scanned in full.

    Args:
      text: the reply as decoded from the server.
      max_chars: the longest reply kept (> 0).

    Returns:
      The :class:`SanitizedReply`.

    Raises:
      ValueError: ``max_chars`` is not positive.
      TypeError: ``text`` is not a ``str``.
    """
    if max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    if not isinstance(text, str):
        raise TypeError(f"reply text must be str, got {type(text).__name__}")
    truncated = len(text) > max_chars
    if truncated:
        text = text[:max_chars]
    cleaned = clean_text(text)
    return SanitizedReply(cleaned, cleaned != text, truncated)
