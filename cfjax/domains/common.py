"""Edit helpers shared by the domains' edit models (not part of the method-facing API).

:func:`masked_signature` and :func:`bind_and_rewrite` work on any token
language with identifiers, strings and numbers; a domain passes its keywords
(never masked). The methods see only :class:`cfjax.types.EditModel`.
"""

from __future__ import annotations

import re

__all__ = ["masked_signature", "bind_and_rewrite"]

_GENERIC_TOK = re.compile(
    r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
    r"|\*\*|//|<=|>=|==|!=|<>|->|=>|\S"
)


def masked_signature(text: str, keywords: frozenset[str]) -> str:
    """``text`` with identifiers (not in ``keywords``), strings and numbers masked.

    The domain-independent edit signature: two records give the same advice
    when the (before, after) signatures of their changed units match.
    """
    out = []
    for t in _GENERIC_TOK.findall(text):
        if t[0] in "'\"":
            out.append("<str>")
        elif t[0].isdigit():
            out.append("<num>")
        elif t[0].isalpha() or t[0] == "_":
            out.append(t if t in keywords else "<id>")
        else:
            out.append(t)
    return " ".join(out)


def bind_and_rewrite(before: str, after: str, target_unit: str, keywords: frozenset[str]) -> str | None:
    """Rewrite ``after`` through the binding of ``before``'s masked tokens to ``target_unit``'s.

    Returns ``None`` when the target's signature differs from ``before``'s or
    a token binds inconsistently. Identifiers of ``after`` absent from
    ``before`` are kept as written. Tokens are re-joined with single spaces, so
    a domain re-prints the result through its own parser.
    """
    btoks = _GENERIC_TOK.findall(before)
    ttoks = _GENERIC_TOK.findall(target_unit)
    if masked_signature(before, keywords) != masked_signature(target_unit, keywords) or len(btoks) != len(ttoks):
        return None

    def masked(tok: str) -> bool:
        return tok[0] in "'\"" or tok[0].isdigit() or ((tok[0].isalpha() or tok[0] == "_") and tok not in keywords)

    binding: dict[str, str] = {}
    for b, t in zip(btoks, ttoks):
        if masked(b) and binding.setdefault(b, t) != t:
            return None
    return " ".join(binding.get(a, a) for a in _GENERIC_TOK.findall(after))
