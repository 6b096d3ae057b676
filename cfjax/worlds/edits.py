"""The domain interface of one-decision-unit edits (papers/countermem.md §3.2, App. B.4, Table 4).

Every world model has its own *decision unit* (Table 4): a SQL predicate or
join, one Python statement, one constraint group of a SAT/SMT encoding. The
domain-independent parts of CounterMem — Module I's local alternatives
(Eq. 1), the store's edit signatures (Eq. 4), the "did memory change the
action" test, the scripted backbone's carrying of a stored edit onto a new
draft — only need the operations of :class:`EditModel`:

* :meth:`EditModel.units` splits an action into its decision units, in a fixed
  order, each with a ``kind`` (``"where"``, ``"stmt"``, ``"group"``...);
* :meth:`EditModel.replace_unit` replaces exactly one unit and re-prints the
  action canonically (so "changed" is a string comparison of canonical forms);
* :meth:`EditModel.rule_edits` lists rule-based one-unit alternatives (the
  operators that fill the K = 4 candidate slots after the backbone's own);
* :meth:`EditModel.transfer` carries a stored ``before → after`` unit edit onto
  a unit of a new action with the same masked shape.

``env`` arguments are the per-environment object a suite provides
(:meth:`Suite.envs`): a database schema for SQL, ``None`` where a domain
needs nothing.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any

from cfjax.worlds import sql_edits as se
from cfjax.worlds.sql_edits import EditError, Unit

__all__ = ["EditError", "Unit", "EditModel", "SQLEdits", "masked_signature", "bind_and_rewrite"]

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


class EditModel(ABC):
    """One-decision-unit edits of one domain's actions (see the module docstring)."""

    name: str = "abstract"

    @abstractmethod
    def units(self, action: str) -> list[Unit]:
        """Decision units of ``action`` in a fixed order. Raises :class:`EditError` if it does not parse."""

    @abstractmethod
    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        """``action`` with unit ``index`` replaced, printed canonically. Raises :class:`EditError`."""

    @abstractmethod
    def normalize(self, action: str) -> str:
        """Canonical print of ``action`` (whitespace-normalised text when it does not parse)."""

    @abstractmethod
    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        """Rule-operator alternatives ``(unit_index, new_unit_text)``; each changes one unit."""

    @abstractmethod
    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        """``target`` with the stored unit edit ``before → after`` carried onto its first matching
        unit, or ``None`` when no unit of ``target`` has ``before``'s masked shape."""

    def signature(self, unit_text: str) -> str:
        """Masked shape of a unit (identifiers and literals replaced by placeholders)."""
        return se.signature(unit_text)

    def diff_units(self, before: str, after: str) -> tuple[int, Unit, Unit] | None:
        """The single unit in which two actions differ, or ``None`` (zero or several units,
        a parse failure, or different unit kinds)."""
        try:
            return se.single_diff(self.units(before), self.units(after))
        except EditError:
            return None


class SQLEdits(EditModel):
    """SQL decision units through :mod:`cfjax.worlds.sql_edits` (``env`` = a schema)."""

    name = "sql"

    def units(self, action: str) -> list[Unit]:
        return se.units(action)

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        return se.replace_unit(action, index, new_text)

    def normalize(self, action: str) -> str:
        return se.normalize(action)

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        return se.rule_edits(action, env)

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        from cfjax.llm.scripted import _resolver  # the schema-aware identifier resolver

        try:
            aliases = se.alias_map(target)
        except EditError:
            return None
        moved = se.transfer_edit(before, after, target, resolve=_resolver(aliases, env))
        if moved is None:
            return None
        i, new = moved
        try:
            return se.replace_unit(target, i, new)
        except EditError:
            return None
