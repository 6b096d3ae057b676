"""Math user rows for ``--suite jsonl:`` (:mod:`cfjax.domains.jsonl`): a Coq theorem to prove.

One line per theorem::

    {"domain": "math", "statement": "forall n : nat, n + 0 = n", "imports": ["Arith", "Lia"],
     "question": "Show that adding zero changes nothing.", "start": "intros n.\\nsimpl.\\nreflexivity.",
     "gold": "intros n.\\nlia."}

* ``statement`` (required): the theorem's type, as after ``Theorem name :`` (no final period);
* ``imports`` (optional, default ``["Arith", "ZArith", "Lia", "List"]``): standard-library modules,
  loaded as ``Require Import …``; ``scope`` (optional): e.g. ``"Z_scope"`` (``Open Scope``);
* ``question`` (optional, default "Prove that <statement>."), ``name`` (optional Coq identifier);
* ``start`` / ``start_path`` (optional): a proof body to repair (shown to the agent);
* ``gold`` / ``gold_path`` (optional): a reference proof body, checked by Coq when the file is loaded
  (a gold Coq rejects is refused, naming the line and Coq's message). Success never needs a gold: the
  kernel decides.

The environment of a row is its preamble (imports and scope); rows with the same preamble share it.
The checker (:mod:`cfjax.domains.math.coq`) validates imports and statement; a bad one is one line
naming the row and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from cfjax.domains.jsonl import Parsed, RowReader, UserDomain, UserRow
from cfjax.domains.math.tasks import context_text, observe_attrs
from cfjax.types import AnswerKey, Task

__all__ = ["UserMath", "DOMAIN", "DEFAULT_IMPORTS"]

DEFAULT_IMPORTS = ("Arith", "ZArith", "Lia", "List")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")
_MODULE = re.compile(r"[A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)*")


def _preamble(imports: Sequence[str], scope: str | None) -> str:
    text = f"Require Import {' '.join(imports)}.\n"
    if "List" in imports:
        text += "Import ListNotations.\n"
    if scope:
        text += f"Open Scope {scope}.\n"
    return text


class UserMath(UserDomain):
    """Theorems to prove (module docstring)."""

    name = "math"

    def __init__(self) -> None:
        self.preambles: dict[str, str] = {}
        self.statements: dict[str, str] = {}
        self.starts: dict[str, str] = {}

    @staticmethod
    def _proof(r: RowReader, names: tuple[str, str]) -> str:
        text_field, path_field = names
        if r.has(path_field):
            return r.read_text(path_field, kind="proof file")[1]
        return r.text(text_field, required=False) or ""

    def parse(self, r: RowReader) -> Parsed:
        from cfjax.domains.math.coq import _validate_name, _validate_statement

        statement = " ".join(r.text("statement").split()).rstrip(".")
        try:
            _validate_statement(statement)
        except ValueError as e:
            raise r.error("statement", str(e)) from None
        imports = r.get("imports", list, required=False, default=list(DEFAULT_IMPORTS))
        if not imports or not all(isinstance(m, str) and _MODULE.fullmatch(m) for m in imports):
            raise r.error("imports", "must be a non-empty list of standard-library module names (e.g. \"Arith\")")
        scope = r.text("scope", required=False)
        if scope is not None and not _IDENT.fullmatch(scope):
            raise r.error("scope", f"not a scope name: {scope!r}")
        name = r.text("name", required=False) or f"user_l{r.line}"
        try:
            _validate_name(name)  # the checker's own rule (no keyword, no reserved prefix)
        except ValueError as e:
            raise r.error("name", str(e)) from None
        preamble = _preamble(tuple(imports), scope)
        env = "coq:" + "+".join(imports) + (f"@{scope}" if scope else "")
        question = r.text("question", required=False) or f"Prove that {statement}."
        start = self._proof(r, ("start", "start_path"))
        gold = self._proof(r, ("gold", "gold_path"))
        context = context_text(f"Coq standard library: {', '.join(imports)}" + (f", {scope}" if scope else ""),
                               preamble, name, statement)
        if start.strip():
            context += "\n\nA proof to repair:\n" + start.strip()
        attrs = observe_attrs(question, env=env, statement=statement)
        return Parsed(question, env, context, attrs, gold=gold.strip(), task_domain="coq",
                      extra={"name": name, "statement": statement, "preamble": preamble, "slip": (0, None)},
                      payload=(preamble, statement, start))

    def finish(self, rows: Sequence[UserRow], path: Path, *, check: bool) -> None:
        for row in rows:
            preamble, statement, start = row.payload
            self.preambles[row.task.env_id] = preamble
            self.statements[row.task.task_id] = statement
            self.starts[row.task.task_id] = start
        if not check:
            return
        from cfjax.domains.jsonl import JSONLError
        from cfjax.domains.math.coq import CoqChecker, coq_info

        if coq_info() is None:
            return  # the runner refuses the suite with the install line (DomainInfo.system_check)
        with CoqChecker() as checker:
            for row in rows:
                if not row.has_gold:
                    continue
                x = row.key.extra
                try:
                    v = checker.check(x["preamble"], x["statement"], row.key.gold, name=x["name"])
                except ValueError as e:
                    raise JSONLError(path, row.line, "imports", str(e)) from None
                if not v.ok:
                    raise JSONLError(path, row.line, "gold", f"Coq rejects the gold proof ({v.status}): "
                                     f"{v.message[:300]}")

    def world(self, root: Path, keys: Mapping[str, AnswerKey], **kwargs) -> object:
        from cfjax.domains.math.world import MathWorld

        return MathWorld(keys, **kwargs)

    def envs(self) -> Mapping[str, object]:
        return dict(self.preambles)

    @property
    def edits(self):
        from cfjax.domains.math.edits import CoqEdits

        return CoqEdits()

    def scripted_domain(self, tasks: Sequence[Task]):
        from cfjax.domains.math.user_draft import UserMathScript

        return UserMathScript({t.task_id: self.statements[t.task_id] for t in tasks},
                              {t.task_id: self.starts.get(t.task_id, "") for t in tasks})


DOMAIN = UserMath
