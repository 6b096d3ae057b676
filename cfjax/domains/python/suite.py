"""The built-in Python bug-fixing suite: generated functions, their unit tests, splits.

>>> suite = PyBugsSuite.build("/tmp/cfjax-pybugs")   # writes the test files (idempotent)
>>> splits = suite.splits(seed=12345)                # Eq. 14 enforced; `events` only in eval
>>> world = suite.world()                            # cfjax.domains.python.world.PytestWorld

The action of every task is the complete source of one function; the world
model runs the task's tests against it in a sandboxed subprocess and scores
the fraction that pass. See :mod:`cfjax.domains.python.tasks` for the families
and :mod:`cfjax.domains.python.script` for the scripted backbone's error model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cfjax.infra.io import write_text_if_changed
from cfjax.domains.base import Suite
from cfjax.types import AnswerKey, Task
from cfjax.domains.python.script import ERRORS, PyScript
from cfjax.domains.python.tasks import (FAMILIES, LEXICON, REPOS, SEMANTIC_KEYS, VARIANTS, Repo, make_tasks,
                                       observe_attrs)
from cfjax.domains.python.world import task_test_path

__all__ = ["PyBugsSuite", "PyScript", "ERRORS", "FAMILIES", "VARIANTS", "LEXICON", "SEMANTIC_KEYS", "REPOS", "Repo",
           "observe_attrs"]


@dataclass(frozen=True)
class PyBugsSuite(Suite):
    """Test files on disk (``<root>/tests/<env>/<family>/test_<nnn>.py``) plus every task.

    The ``events`` repository is held out of build and train by default: its
    base tasks are the *new environment* transfer condition (App. D.4).
    """

    name = "pybugs"
    holdout_envs = ("events",)

    root: Path
    tasks: tuple[Task, ...]
    keys: dict[str, AnswerKey]

    @classmethod
    def build(cls, root: str | Path, *, task_seed: int = 0) -> "PyBugsSuite":
        """Generate the tasks and write their test files under ``root`` (idempotent: a file
        is only rewritten, atomically, when its content differs)."""
        root = Path(root)
        tasks, keys = [], {}
        for task, key, source in make_tasks(task_seed):
            keys[task.task_id] = key
            write_text_if_changed(task_test_path(root / "tests", task.task_id), source)
            tasks.append(task)
        return cls(root, tuple(tasks), keys)

    @classmethod
    def open(cls, root: str | Path, *, task_seed: int = 0) -> "PyBugsSuite":
        """The suite over test files :meth:`build` already wrote under ``root`` (read-only;
        safe to call from several processes at once)."""
        root = Path(root)
        tasks, keys = [], {}
        for task, key, _ in make_tasks(task_seed):
            keys[task.task_id] = key
            path = task_test_path(root / "tests", task.task_id)
            if not path.is_file():
                raise FileNotFoundError(f"no test file {path}; create the suite with PyBugsSuite.build({str(root)!r})")
            tasks.append(task)
        return cls(root, tuple(tasks), keys)

    @property
    def tests_root(self) -> Path:
        return self.root / "tests"

    def test_file(self, task: Task) -> Path:
        return task_test_path(self.tests_root, task.task_id)

    def world(self, *, feedback: str = "user", **kwargs):
        """A :class:`~cfjax.domains.python.world.PytestWorld` over this suite's test files.

        ``feedback``: ``"user"`` (default: failing tests' calls and the action's own results) or
        ``"rich"`` (also the tests' expected values); other keyword arguments go to the world."""
        from cfjax.domains.python.world import PytestWorld

        return PytestWorld(self.tests_root, self.keys, feedback=feedback, **kwargs)

    def envs(self) -> dict[str, None]:
        return {r.env_id: None for r in REPOS}

    @property
    def edits(self):
        from cfjax.domains.python.edits import PythonEdits

        return PythonEdits()

    def scripted_domain(self) -> PyScript:
        return PyScript(self.keys)
