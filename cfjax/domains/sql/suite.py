"""The built-in SQL suite: generated databases, task templates, splits.

>>> suite = SQLSuite.build("/tmp/cfjax-sql")        # writes 5 sqlite files
>>> splits = suite.splits(seed=12345)               # Eq. 14 enforced
>>> world = suite.world()                           # cfjax.domains.sql.world.SQLWorld
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.domains.base import Suite
from cfjax.types import AnswerKey, Task
from cfjax.domains.sql.databases import DATABASES, DatabaseSpec, build_database, schema_text
from cfjax.domains.sql.tasks import FAMILIES, LEXICON, make_tasks, observe_attrs

__all__ = ["SQLSuite", "DATABASES", "DatabaseSpec", "FAMILIES", "LEXICON", "observe_attrs", "schema_text"]


@dataclass(frozen=True)
class SQLSuite(Suite):
    """Databases on disk plus every task generated from them.

    The ``clinic`` database is held out of build and train by default: its
    base tasks are the *new environment* transfer condition (App. D.4).
    """

    name = "sql"
    holdout_envs = ("clinic",)

    root: Path
    specs: dict[str, DatabaseSpec]
    tasks: tuple[Task, ...]
    keys: dict[str, AnswerKey]

    @classmethod
    def build(cls, root: str | Path, *, task_seed: int = 0, databases: Sequence[DatabaseSpec] = DATABASES) -> "SQLSuite":
        """Generate the databases under ``root`` (idempotent) and the tasks."""
        root = Path(root)
        specs = {s.db_id: s for s in databases}
        pairs = []
        for i, spec in enumerate(databases):
            path = root / f"{spec.db_id}.sqlite"
            build_database(spec, path)
            pairs.extend(make_tasks(spec, path, seed=task_seed * 1000 + i))
        return cls(root, specs, tuple(t for t, _ in pairs), {t.task_id: k for t, k in pairs})

    @classmethod
    def open(cls, root: str | Path, *, task_seed: int = 0, databases: Sequence[DatabaseSpec] = DATABASES) -> "SQLSuite":
        """The suite over databases :meth:`build` already wrote under ``root`` (read-only; safe to call
        from several processes at once)."""
        root = Path(root)
        specs = {s.db_id: s for s in databases}
        pairs = []
        for i, spec in enumerate(databases):
            path = root / f"{spec.db_id}.sqlite"
            if not path.exists():
                raise FileNotFoundError(f"no database {path}; create the suite with SQLSuite.build({str(root)!r})")
            pairs.extend(make_tasks(spec, path, seed=task_seed * 1000 + i))
        return cls(root, specs, tuple(t for t, _ in pairs), {t.task_id: k for t, k in pairs})

    @property
    def db_paths(self) -> dict[str, Path]:
        return {db: self.root / f"{db}.sqlite" for db in self.specs}

    def world(self, *, feedback: str = "user", **kwargs):
        """A :class:`~cfjax.domains.sql.world.SQLWorld` over this suite's databases.

        ``feedback``: ``"user"`` (default: error text or a pass/fail verdict with the query's own
        result shape) or ``"rich"`` (also the expected result's row count and the overlap);
        other keyword arguments go to the world."""
        from cfjax.domains.sql.world import SQLWorld

        return SQLWorld(self.db_paths, self.keys, feedback=feedback, **kwargs)

    def envs(self) -> dict[str, DatabaseSpec]:
        return dict(self.specs)

    @property
    def edits(self):
        from cfjax.domains.sql.edits import SQLEdits

        return SQLEdits()

    def scripted_domain(self):
        from cfjax.domains.sql.script import SQLScript

        return SQLScript(self.specs, self.keys)
