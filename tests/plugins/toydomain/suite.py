"""The toylist suite: five integer lists on disk, the tasks generated from them, the world.

>>> suite = ToyListSuite.build("/tmp/toylist")     # writes one JSON file per list
>>> world = suite.world()                          # ToyListWorld: runs a pipeline, compares results
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfjax.domains.base import Suite
from cfjax.infra.io import atomic_write_text
from cfjax.types import AnswerKey, Outcome, Task

from tests.plugins.toydomain.lang import PipelineError, ToyListEdits, parse, run
from tests.plugins.toydomain.tasks import ENVS, make_tasks

__all__ = ["ToyListSuite", "ToyListWorld", "FORMAT"]

FORMAT = "cfjax-toylist/1"


def _show(v: Any) -> str:
    return str(v) if isinstance(v, int) else "[" + ", ".join(map(str, v)) + "]"


class ToyListWorld:
    """Runs a pipeline on its task's list and compares the result with the gold pipeline's.

    Args:
      data: ``env_id → values``.
      keys: ``task_id → AnswerKey`` (the gold pipelines).
      feedback: ``"user"`` (the pipeline's own result or error; default) or ``"rich"`` (also the expected
        result's type and size).
      timeout_s: accepted for the runners' world options; a pipeline is bounded, so it is not needed.
    """

    def __init__(self, data: dict[str, tuple[int, ...]], keys: dict[str, AnswerKey], *, feedback: str = "user",
                 timeout_s: float | None = None, **_: Any) -> None:
        if feedback not in ("user", "rich"):
            raise ValueError(f"feedback must be 'user' or 'rich', got {feedback!r}")
        self.data = data
        self.keys = keys
        self.feedback = feedback
        self.calls = 0

    def evaluate(self, task: Task, action: str) -> Outcome:
        self.calls += 1
        vals = self.data[task.env_id]
        try:
            got = run(parse(action), vals)
        except PipelineError as e:
            kind = "runtime_error" if "empty list" in str(e) else "parse_error"
            return Outcome(0.0, False, True, f"error: {e}", error=kind)
        want = run(parse(self.keys[task.task_id].gold), vals)
        if got == want:
            return Outcome(1.0, True, True, f"the pipeline returned {_show(got)}: correct")
        fb = f"the pipeline returned {_show(got)}, which is not what was asked"
        if self.feedback == "rich":
            fb += (f" (expected a number)" if isinstance(want, int) else f" (expected a list of {len(want)} values)")
        return Outcome(0.0, False, True, fb, error="wrong_result")

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ToyListSuite(Suite):
    """The lists on disk plus every task generated from them; ``prices`` is held out (new environment)."""

    name = "toylist"
    holdout_envs = ("prices",)

    root: Path
    data: dict[str, tuple[int, ...]]
    tasks: tuple[Task, ...]
    keys: dict[str, AnswerKey]

    @staticmethod
    def _generate(env_ids, task_seed: int):
        pairs = [p for env in env_ids for p in make_tasks(env, seed=task_seed)]
        return tuple(t for t, _ in pairs), {t.task_id: k for t, k in pairs}

    @classmethod
    def build(cls, root: str | Path, *, task_seed: int = 0) -> "ToyListSuite":
        """Write ``<env>.json`` for every list under ``root`` (idempotent, atomic) and generate the tasks."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        for env, vals in ENVS.items():
            path = root / f"{env}.json"
            text = json.dumps({"format": FORMAT, "env": env, "values": list(vals)}) + "\n"
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                atomic_write_text(path, text)
        return cls.open(root, task_seed=task_seed)

    @classmethod
    def open(cls, root: str | Path, *, task_seed: int = 0) -> "ToyListSuite":
        """The suite over the files :meth:`build` wrote (read-only; safe from several processes)."""
        root = Path(root)
        data = {}
        for env in ENVS:
            path = root / f"{env}.json"
            if not path.exists():
                raise FileNotFoundError(f"no list {path}; create the suite with ToyListSuite.build({str(root)!r})")
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("format") != FORMAT or tuple(doc.get("values", ())) != ENVS[env]:
                raise ValueError(f"{path}: not the {env} list of {FORMAT}; rebuild the suite")
            data[env] = tuple(doc["values"])
        tasks, keys = cls._generate(data, task_seed)
        return cls(root, data, tasks, keys)

    def world(self, *, feedback: str = "user", **kwargs: Any) -> ToyListWorld:
        return ToyListWorld(self.data, self.keys, feedback=feedback, **kwargs)

    def envs(self) -> dict[str, tuple[int, ...]]:
        return dict(self.data)

    @property
    def edits(self) -> ToyListEdits:
        return ToyListEdits()

    def scripted_domain(self):
        from tests.plugins.toydomain.script import ToyListScript

        return ToyListScript(self.data, self.keys)
