"""The built-in SQL suite: generated databases, task templates, splits.

>>> suite = SQLSuite.build("/tmp/cfjax-sql")        # writes 5 sqlite files
>>> splits = suite.splits(seed=12345)               # Eq. 14 enforced
>>> world = suite.world()                           # cfjax.worlds.sql.SQLWorld
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cfjax.suites.base import Splits, Task
from cfjax.suites.sql.databases import DATABASES, DatabaseSpec, build_database, schema_text
from cfjax.suites.sql.tasks import FAMILIES, LEXICON, make_tasks, observe_attrs

__all__ = ["SQLSuite", "DATABASES", "DatabaseSpec", "FAMILIES", "LEXICON", "observe_attrs", "schema_text"]


@dataclass(frozen=True)
class SQLSuite:
    """Databases on disk plus every task generated from them."""

    root: Path
    specs: dict[str, DatabaseSpec]
    tasks: tuple[Task, ...]

    @classmethod
    def build(cls, root: str | Path, *, task_seed: int = 0, databases: Sequence[DatabaseSpec] = DATABASES) -> "SQLSuite":
        """Generate the databases under ``root`` (idempotent) and the tasks."""
        root = Path(root)
        specs = {s.db_id: s for s in databases}
        tasks: list[Task] = []
        for i, spec in enumerate(databases):
            path = root / f"{spec.db_id}.sqlite"
            build_database(spec, path)
            tasks.extend(make_tasks(spec, path, seed=task_seed * 1000 + i))
        return cls(root, specs, tuple(tasks))

    @classmethod
    def open(cls, root: str | Path, *, task_seed: int = 0, databases: Sequence[DatabaseSpec] = DATABASES) -> "SQLSuite":
        """The suite over databases :meth:`build` already wrote under ``root`` (read-only; safe to call
        from several processes at once)."""
        root = Path(root)
        specs = {s.db_id: s for s in databases}
        tasks: list[Task] = []
        for i, spec in enumerate(databases):
            path = root / f"{spec.db_id}.sqlite"
            if not path.exists():
                raise FileNotFoundError(f"no database {path}; create the suite with SQLSuite.build({str(root)!r})")
            tasks.extend(make_tasks(spec, path, seed=task_seed * 1000 + i))
        return cls(root, specs, tuple(tasks))

    @property
    def db_paths(self) -> dict[str, Path]:
        return {db: self.root / f"{db}.sqlite" for db in self.specs}

    def world(self, **kwargs):
        """A :class:`~cfjax.worlds.sql.SQLWorld` over this suite's databases."""
        from cfjax.worlds.sql import SQLWorld

        return SQLWorld(self.db_paths, **kwargs)

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(f"no task {task_id!r} in the SQL suite")

    def splits(self, *, seed: int = 12345, eval_frac: float = 0.3, build_frac: float = 0.35,
               n_val: int = 20) -> Splits:
        """Stratified build / train / val / eval splits (disjoint; Eq. 14).

        Tasks are grouped by (family, variant) and each group is shuffled with
        ``seed`` and dealt out in the given proportions, so every split sees
        every family and every transfer variant. ``val`` (the
        selector-validation subset, App. C.2) is taken from the training share.
        """
        if not 0 < eval_frac < 1 or not 0 < build_frac < 1 or eval_frac + build_frac >= 1:
            raise ValueError(f"bad split fractions: eval_frac={eval_frac}, build_frac={build_frac}")
        rng = random.Random(seed)
        groups: dict[tuple[str, str], list[Task]] = defaultdict(list)
        for t in self.tasks:
            groups[(t.family, t.variant)].append(t)
        build, train, eval_ = [], [], []
        for key in sorted(groups):
            g = groups[key]
            rng.shuffle(g)
            n_eval = round(len(g) * eval_frac)
            n_build = round(len(g) * build_frac)
            eval_ += g[:n_eval]
            build += g[n_eval:n_eval + n_build]
            train += g[n_eval + n_build:]
        rng.shuffle(train)
        if n_val >= len(train):
            raise ValueError(f"n_val={n_val} leaves no training tasks (train has {len(train)})")
        return Splits(build=tuple(build), train=tuple(train[n_val:]), val=tuple(train[:n_val]), eval=tuple(eval_))
