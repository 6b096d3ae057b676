"""The math world: Coq's kernel checks a candidate proof of the task's theorem (papers/countermem.md
App. D.1: Math is formal proofs checked by a proof kernel, the decision unit a tactic).

An action is the proof body: tactic sentences (a leading ``Proof.`` and a final ``Qed.`` are
accepted and dropped, as a user would paste them). :class:`MathWorld` hands the task's environment
preamble, its theorem statement and the candidate body to :class:`cfjax.domains.math.coq.CoqChecker`,
which refuses every vernacular command in the body, ends the proof with ``Qed.`` itself, runs Coq
under the sandbox's OS layers with time and memory bounds, and accepts only a proof that depends on
no axiom (``Print Assumptions``). Scores are binary: 1 for a kernel-checked proof, 0 otherwise.

Feedback is what a user of Coq sees (``feedback="user"``, the default): the first failing tactic, its
line in the candidate's proof and Coq's message — or that the proof is unfinished, uses an axiom, or
ran out of time or memory. ``feedback="rich"`` adds the goal state before the failing tactic. Neither
mode says anything the checker did not observe (no gold, no hint of the intended tactic).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from cfjax.types import AnswerKey, Outcome, Task

__all__ = ["MathWorld", "strip_proof_frame"]

_FEEDBACK_CHARS = 1200
_PROOF = re.compile(r"^\s*Proof\s*\.(?=\s|$)")
_QED = re.compile(r"(?:^|\s)(?:Qed|Defined)\s*\.\s*$")


def strip_proof_frame(action: str) -> str:
    """``action`` without one leading ``Proof.`` and one final ``Qed.``/``Defined.`` (and without a
    ``` fence the parser left); everything else is kept for the checker to judge."""
    body = action.strip()
    body = _PROOF.sub("", body, count=1)
    m = _QED.search(body)
    if m:
        body = body[:m.start()]
    return body.strip()


class MathWorld:
    """``evaluate(task, action)`` checks a proof body by the Coq kernel (module docstring).

    Args:
      keys: the suite's answer keys (each key's ``extra`` holds the theorem's ``name``, ``statement``
        and its environment's ``preamble``; the gold is never consulted to judge an action).
      feedback: ``"user"`` or ``"rich"`` (adds the goal state before the failing tactic).
      timeout_s, memory_mb: bounds of one check (wall-clock; address space of the Coq process).
      persistent: reuse a long-lived Coq process per environment (else one fresh ``coqc`` per check).
      max_processes: persistent processes kept (one per environment: the built-in suite has 5, so
        the default 8 never closes one to open another).
    """

    def __init__(self, keys: Mapping[str, AnswerKey], *, feedback: str = "user", timeout_s: float = 10.0,
                 memory_mb: int = 2048, persistent: bool = True, max_processes: int = 8) -> None:
        if feedback not in ("user", "rich"):
            raise ValueError(f"feedback must be 'user' or 'rich', got {feedback!r}")
        from cfjax.domains.math.coq import CoqChecker

        self._keys = dict(keys)
        self.feedback = feedback
        self.checker = CoqChecker(timeout_s=timeout_s, memory_mb=memory_mb, persistent=persistent,
                                  max_processes=max_processes)

    def close(self) -> None:
        self.checker.close()

    def __enter__(self) -> "MathWorld":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def evaluate(self, task: Task, action: str) -> Outcome:
        start = time.perf_counter()
        key = self._keys.get(task.task_id)
        if key is None:
            raise KeyError(f"the math world has no theorem for task {task.task_id!r}")
        x = key.extra
        body = strip_proof_frame(action or "")
        if not body:
            return Outcome(0.0, False, True, "The proof is empty: write the tactics that prove the theorem.",
                           "empty", time.perf_counter() - start)
        try:
            v = self.checker.check(x["preamble"], x["statement"], body, goals=self.feedback == "rich",
                                   name=x["name"])
        except Exception as e:  # noqa: BLE001 - a failure is an outcome, never an exception (issue 25)
            return Outcome(0.0, False, False, f"The proof checker failed internally ({type(e).__name__}); "
                           "the proof was not checked.", "internal", time.perf_counter() - start)
        elapsed = time.perf_counter() - start
        if v.ok:
            return Outcome(1.0, True, True, "Proved: Coq's kernel accepts the proof (Qed), and it uses no axiom.",
                           None, elapsed)
        return Outcome(0.0, False, v.status not in ("timeout", "crash"), self._text(v), v.status, elapsed)

    def _text(self, v) -> str:
        where = ""
        if v.sentence is not None:
            where = f"Sentence {v.sentence + 1}" + (f" (line {v.line})" if v.line else "") + \
                    (f", `{_clip(v.failing, 160)}`" if v.failing else "") + ": "
        head = {"error": "Coq rejects the proof. ", "incomplete": "The proof is not finished. ",
                "axiom": "The proof depends on an axiom or an admitted step, which is never accepted. ",
                "refused": "The proof contains a command that is not a tactic, which is refused. ",
                "timeout": "The check ran out of time. ", "memory": "The check ran out of memory. ",
                "crash": "The proof checker stopped unexpectedly. "}.get(v.status, "Coq rejects the proof. ")
        text = head + where + (v.message or "")
        if self.feedback == "rich" and v.goals:
            text += "\nGoals before the failing sentence:\n" + v.goals
        return _clip(text, _FEEDBACK_CHARS)


def _clip(s: str, n: int) -> str:
    s = s.strip()
    return s if len(s) <= n else s[: n - 1] + "…"
