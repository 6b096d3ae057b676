"""The built-in math suite: miniF2F-style theorems over ``nat``, ``Z`` and lists, checked by Coq's kernel.

>>> suite = MathSuite.build("/tmp/cfjax-math")   # writes theorems.json (the manifest open() checks)
>>> world = suite.world()                        # a MathWorld over a persistent, sandboxed Coq checker

The theorems, their gold proofs, families, variants and slips are :mod:`cfjax.domains.math.theorems`
(every gold checks, every slip fails — its test); tasks are :mod:`cfjax.domains.math.tasks`; the
edit model (one tactic sentence per unit) :mod:`cfjax.domains.math.edits`; the world
:mod:`cfjax.domains.math.world`; the scripted error model :mod:`cfjax.domains.math.script`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cfjax.domains.base import Suite
from cfjax.domains.math.tasks import make_tasks
from cfjax.domains.math.theorems import ENVS, FAMILIES, THEOREMS
from cfjax.infra.io import atomic_write_text
from cfjax.types import AnswerKey, Task

__all__ = ["MathSuite", "ENVS", "FAMILIES", "THEOREMS", "HOLDOUT_ENV"]

FORMAT = "cfjax-math/1"
#: the environment held out of build and train: its base tasks are the new-environment condition
HOLDOUT_ENV = "z_numtheory"


def _manifest(theorems) -> str:
    doc = {"format": FORMAT, "theorems": [
        {"tid": t.tid, "env_id": t.env_id, "name": t.name, "statement": t.statement, "gold": list(t.gold)}
        for t in theorems]}
    return json.dumps(doc, indent=1) + "\n"


@dataclass(frozen=True)
class MathSuite(Suite):
    """Every theorem as a task (module docstring); ``root`` holds the manifest."""

    name = "math"
    holdout_envs = (HOLDOUT_ENV,) if HOLDOUT_ENV in ENVS else ()

    root: Path
    tasks: tuple[Task, ...]
    keys: dict[str, AnswerKey]

    @classmethod
    def _make(cls, root: Path) -> "MathSuite":
        made = make_tasks(THEOREMS, ENVS)
        return cls(root, tuple(m.task for m in made), {m.task.task_id: m.key for m in made})

    @classmethod
    def build(cls, root: str | Path) -> "MathSuite":
        """Write ``theorems.json`` under ``root`` (idempotent, atomic) and make the tasks."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        text = _manifest(THEOREMS)
        path = root / "theorems.json"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write_text(path, text)
        return cls._make(root)

    @classmethod
    def open(cls, root: str | Path) -> "MathSuite":
        """The suite :meth:`build` wrote under ``root`` (read-only). Raises ``ValueError`` when the
        manifest is from another version of the theorems."""
        root = Path(root)
        path = root / "theorems.json"
        if not path.exists():
            raise FileNotFoundError(f"no manifest {path}; create the suite with MathSuite.build({str(root)!r})")
        if path.read_text(encoding="utf-8") != _manifest(THEOREMS):
            raise ValueError(f"{path}: the theorems differ from this cfjax version's; rebuild the suite")
        return cls._make(root)

    def world(self, *, feedback: str = "user", **kwargs):
        """A :class:`~cfjax.domains.math.world.MathWorld` (``feedback="user"``: the failing tactic, its
        line and Coq's message; ``"rich"`` adds the goal state); other keywords go to the world."""
        from cfjax.domains.math.world import MathWorld

        return MathWorld(self.keys, feedback=feedback, **kwargs)

    def envs(self) -> dict[str, object]:
        return dict(ENVS)

    @property
    def edits(self):
        from cfjax.domains.math.edits import CoqEdits

        return CoqEdits()

    def scripted_domain(self):
        from cfjax.domains.math.script import MathScript

        return MathScript(ENVS, self.keys)
