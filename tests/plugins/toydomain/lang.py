"""The toylist action language: a pipeline of steps over a list of integers, its parser, canonical
printer, evaluator and one-decision-unit edit model.

A pipeline is one step per line, applied in order to the environment's list ``x``::

    filter x >= 5        keep the values for which the comparison holds (>= > <= < == !=)
    map x * 2            replace every value (+ - * // %; // and % need N >= 1)
    sort desc            sort ascending (asc) or descending (desc)
    take 3               keep the first N values
    sum                  a final aggregation: sum | count | count unique | max | min

An aggregation may only be the last step. The evaluator is plain Python over the parsed steps (no model
code is ever executed: ``DomainInfo.untrusted_code`` is ``False``); a pipeline is bounded by
:data:`MAX_STEPS` and :data:`MAX_ABS`, so every evaluation is fast and finite.

Decision units (``EditModel.units``) are the steps; a unit's kind is its step name (``filter``, ``map``,
``sort``, ``take``, ``agg``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cfjax.domains.common import bind_and_rewrite, masked_signature
from cfjax.types import EditError, EditModel, Unit

__all__ = ["Step", "parse_step", "parse", "print_step", "print_pipeline", "run", "ToyListEdits", "KEYWORDS",
           "CMP_OPS", "MAP_OPS", "AGGS", "MAX_STEPS", "MAX_ABS", "PipelineError"]

CMP_OPS = (">=", ">", "<=", "<", "==", "!=")
MAP_OPS = ("+", "-", "*", "//", "%")
AGGS = ("sum", "count", "count unique", "max", "min")
MAX_STEPS = 20
MAX_ABS = 10**6  # bound on every literal
KEYWORDS = frozenset({"filter", "map", "sort", "asc", "desc", "take", "sum", "count", "unique", "max", "min", "x"})

_INT = r"(-?\d{1,7})"
_FILTER = re.compile(r"^filter\s+x\s*(>=|<=|==|!=|>|<)\s*" + _INT + r"$")
_MAP = re.compile(r"^map\s+x\s*(\+|-|\*|//|%)\s*" + _INT + r"$")
_SORT = re.compile(r"^sort\s+(asc|desc)$")
_TAKE = re.compile(r"^take\s+(\d{1,7})$")
_AGG = re.compile(r"^(sum|count\s+unique|count|max|min)$")


class PipelineError(ValueError):
    """A pipeline that does not parse or cannot run (the message is the evaluator's feedback)."""


@dataclass(frozen=True)
class Step:
    """One parsed step: ``kind`` (filter | map | sort | take | agg), ``op`` and the literal ``n``."""

    kind: str
    op: str
    n: int = 0


def parse_step(text: str) -> Step:
    """One line as a :class:`Step`. Raises :class:`PipelineError`."""
    t = " ".join(text.strip().lower().split())
    if m := _FILTER.match(t):
        return Step("filter", m.group(1), _lit(m.group(2)))
    if m := _MAP.match(t):
        op, n = m.group(1), _lit(m.group(2))
        if op in ("//", "%") and n < 1:
            raise PipelineError(f"'{t}': {op} needs a divisor of at least 1")
        return Step("map", op, n)
    if m := _SORT.match(t):
        return Step("sort", m.group(1))
    if m := _TAKE.match(t):
        return Step("take", "take", _lit(m.group(1)))
    if m := _AGG.match(t):
        return Step("agg", " ".join(m.group(1).split()))
    shown = t if len(t) <= 40 else t[:40] + "…"
    raise PipelineError(f"unknown step {shown!r} (steps: filter x OP N, map x OP N, sort asc|desc, take N, "
                        "sum, count, count unique, max, min)")


def _lit(s: str) -> int:
    v = int(s)
    if abs(v) > MAX_ABS:
        raise PipelineError(f"literal {v} is out of range (|N| <= {MAX_ABS})")
    return v


def parse(action: str) -> list[Step]:
    """Every non-blank line of ``action`` as a step. Raises :class:`PipelineError`."""
    lines = [ln for ln in action.replace("\r", "\n").split("\n") if ln.strip()]
    if not lines:
        raise PipelineError("the pipeline is empty: write one step per line")
    if len(lines) > MAX_STEPS:
        raise PipelineError(f"the pipeline has {len(lines)} steps (at most {MAX_STEPS})")
    steps = []
    for i, ln in enumerate(lines, 1):
        try:
            steps.append(parse_step(ln))
        except PipelineError as e:
            raise PipelineError(f"line {i}: {e}") from None
    if any(s.kind == "agg" for s in steps[:-1]):
        raise PipelineError("an aggregation (sum, count, count unique, max, min) may only be the last step")
    return steps


def print_step(s: Step) -> str:
    if s.kind in ("filter", "map"):
        return f"{s.kind} x {s.op} {s.n}"
    if s.kind == "sort":
        return f"sort {s.op}"
    if s.kind == "take":
        return f"take {s.n}"
    return s.op


def print_pipeline(steps: list[Step]) -> str:
    return "\n".join(print_step(s) for s in steps)


_CMP = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
_MAPF = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
         "%": lambda a, b: a % b}


def run(steps: list[Step], values: tuple[int, ...]) -> int | tuple[int, ...]:
    """The pipeline's result on ``values``: a tuple, or an int after an aggregation. Raises
    :class:`PipelineError` (max/min of an empty list)."""
    xs = list(values)
    for s in steps:
        if s.kind == "filter":
            xs = [v for v in xs if _CMP[s.op](v, s.n)]
        elif s.kind == "map":
            xs = [_MAPF[s.op](v, s.n) for v in xs]
        elif s.kind == "sort":
            xs = sorted(xs, reverse=s.op == "desc")
        elif s.kind == "take":
            xs = xs[:s.n]
        else:
            if s.op in ("max", "min") and not xs:
                raise PipelineError(f"{s.op} of an empty list")
            return {"sum": sum, "count": len, "count unique": lambda v: len(set(v)), "max": max,
                    "min": min}[s.op](xs)
    return tuple(xs)


class ToyListEdits(EditModel):
    """One-step edits of toylist pipelines (the decision units are the steps)."""

    name = "toylist"

    def _steps(self, action: str) -> list[Step]:
        try:
            return parse(action)
        except PipelineError as e:
            raise EditError(str(e)) from None

    def units(self, action: str) -> list[Unit]:
        return [Unit(s.kind, print_step(s)) for s in self._steps(action)]

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        steps = self._steps(action)
        if not 0 <= index < len(steps):
            raise EditError(f"no step {index} in a pipeline of {len(steps)} steps")
        try:
            steps[index] = parse_step(new_text)
        except PipelineError as e:
            raise EditError(str(e)) from None
        try:
            return print_pipeline(parse(print_pipeline(steps)))  # an aggregation moved inside is refused
        except PipelineError as e:
            raise EditError(str(e)) from None

    def normalize(self, action: str) -> str:
        try:
            return print_pipeline(parse(action))
        except PipelineError:
            return " ".join(action.split())

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        """Per step: every other comparison and N ± 1 (filter); N ± 1 and + ↔ -, * ↔ // (map); the other
        direction (sort); N ± 1 (take); every other aggregation (agg)."""
        out: list[tuple[int, str]] = []
        for i, s in enumerate(self._steps(action)):
            alts: list[Step] = []
            if s.kind == "filter":
                alts = [Step("filter", op, s.n) for op in CMP_OPS if op != s.op]
                alts += [Step("filter", s.op, s.n - 1), Step("filter", s.op, s.n + 1)]
            elif s.kind == "map":
                lo = 1 if s.op in ("//", "%", "*") else 0
                alts = [Step("map", s.op, n) for n in (s.n - 1, s.n + 1) if n >= lo]
                swap = {"+": "-", "-": "+", "*": "//", "//": "*"}.get(s.op)
                if swap is not None and (swap != "//" or s.n >= 1):
                    alts.append(Step("map", swap, s.n))
            elif s.kind == "sort":
                alts = [Step("sort", "asc" if s.op == "desc" else "desc")]
            elif s.kind == "take":
                alts = [Step("take", "take", n) for n in (s.n - 1, s.n + 1) if n >= 0]
            else:
                alts = [Step("agg", a) for a in AGGS if a != s.op]
            seen = {print_step(s)}
            for a in alts:
                if abs(a.n) > MAX_ABS:
                    continue
                text = print_step(a)
                if text not in seen:
                    seen.add(text)
                    out.append((i, text))
        return out

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        try:
            steps = self._steps(target)
        except EditError:
            return None
        sig = masked_signature(before, KEYWORDS)
        for i, s in enumerate(steps):
            text = print_step(s)
            if masked_signature(text, KEYWORDS) != sig:
                continue
            new = bind_and_rewrite(before, after, text, KEYWORDS)
            if new is None:
                continue
            try:
                return self.replace_unit(target, i, new)
            except EditError:
                return None
        return None

    def signature(self, unit_text: str) -> str:
        return masked_signature(unit_text, KEYWORDS)
