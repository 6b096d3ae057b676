"""The built-in SAT/SMT encoding suite: instances, task templates, splits.

>>> suite = SATSuite.build("/tmp/cfjax-sat")        # writes one JSON file per environment
>>> splits = suite.splits(seed=12345)               # Eq. 14 enforced; roster_b held out
>>> world = suite.world()                           # SAT and SMT worlds behind one dispatcher

Six environments (two maps to colour, two staff rosters, two project
schedules) and nine error families (five SAT, four SMT), each with base,
look-alike and new-surface variants (:mod:`cfjax.domains.sat.tasks`). A SAT
task's action is an encoding in the line-based language of
:mod:`cfjax.domains.sat.sat_world`; an SMT task's action is an SMT-LIB (QF_LIA) script
checked by :mod:`cfjax.domains.sat.smt_world`. Each environment file holds the instance
and the verifier rules of its tasks; the tasks themselves are regenerated
deterministically from the instances.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfjax.infra.io import atomic_write_text
from cfjax.domains.base import Suite
from cfjax.types import AnswerKey, Task
from cfjax.domains.sat.instances import INSTANCES, context_text
from cfjax.domains.sat.tasks import FAMILIES, FAMILY_KEY, LEXICON, SAT_FAMILIES, SMT_FAMILIES, make_tasks, observe_attrs
from cfjax.domains.sat.sat_world import SATInstance
from cfjax.domains.sat.smt_world import SMTInstance

__all__ = ["SATSuite", "INSTANCES", "FAMILIES", "SAT_FAMILIES", "SMT_FAMILIES", "FAMILY_KEY", "LEXICON",
           "observe_attrs", "context_text"]

FORMAT = "cfjax-sat/1"


def _file_text(inst: SATInstance | SMTInstance, rules: dict[str, tuple[dict, ...]]) -> str:
    doc = {"format": FORMAT, "instance": inst.to_json(), "rules": {k: list(v) for k, v in sorted(rules.items())}}
    # no sort_keys: the order of sets and variables is meaningful (variable numbering, context text)
    return json.dumps(doc, indent=1) + "\n"


def _load_instance(d: dict[str, Any]) -> SATInstance | SMTInstance:
    return SMTInstance.from_json(d) if d.get("solver") == "smt" else SATInstance.from_json(d)


@dataclass(frozen=True)
class SATSuite(Suite):
    """Instances on disk plus every task generated from them.

    ``roster_b`` is held out of build and train by default: its base tasks
    are the *new environment* transfer condition (App. D.4).
    """

    name = "sat"
    holdout_envs = ("roster_b",)

    root: Path
    instances: dict[str, SATInstance | SMTInstance]
    tasks: tuple[Task, ...]
    rules: dict[str, tuple[dict, ...]]
    keys: dict[str, AnswerKey]

    @staticmethod
    def _generate(instances, task_seed: int):
        tasks: list[Task] = []
        keys: dict[str, AnswerKey] = {}
        rules: dict[str, dict[str, tuple[dict, ...]]] = {}
        for i, inst in enumerate(instances):
            gen = make_tasks(inst, seed=task_seed * 1000 + i)
            tasks.extend(g.task for g in gen)
            keys.update((g.task.task_id, g.key) for g in gen)
            rules[inst.env_id] = {g.task.task_id: g.rules for g in gen}
        return tasks, rules, keys

    @classmethod
    def build(cls, root: str | Path, *, task_seed: int = 0,
              instances: tuple[SATInstance | SMTInstance, ...] = INSTANCES) -> "SATSuite":
        """Write one ``<env_id>.json`` per instance under ``root`` (idempotent, atomic) and generate the tasks."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        tasks, rules, keys = cls._generate(instances, task_seed)
        for inst in instances:
            path = root / f"{inst.env_id}.json"
            text = _file_text(inst, rules[inst.env_id])
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                atomic_write_text(path, text)
        return cls(root, {i.env_id: i for i in instances}, tuple(tasks),
                   {k: v for r in rules.values() for k, v in r.items()}, keys)

    @classmethod
    def open(cls, root: str | Path, *, task_seed: int = 0,
             env_ids: tuple[str, ...] | None = None) -> "SATSuite":
        """The suite over the files :meth:`build` wrote under ``root`` (read-only; safe to call from
        several processes at once). Raises ``ValueError`` when a file's rules disagree with the
        tasks regenerated from its instance (a file from another version)."""
        root = Path(root)
        ids = env_ids or tuple(i.env_id for i in INSTANCES)
        loaded = []
        stored: dict[str, dict] = {}
        for env in ids:
            path = root / f"{env}.json"
            if not path.exists():
                raise FileNotFoundError(f"no instance {path}; create the suite with SATSuite.build({str(root)!r})")
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("format") != FORMAT:
                raise ValueError(f"{path}: unknown format {doc.get('format')!r} (expected {FORMAT!r})")
            loaded.append(_load_instance(doc["instance"]))
            stored[env] = doc["rules"]
        tasks, rules, keys = cls._generate(loaded, task_seed)
        for env, r in rules.items():
            if {k: list(v) for k, v in r.items()} != stored[env]:
                raise ValueError(f"{root / (env + '.json')}: its verifier rules differ from the generated tasks; "
                                 "rebuild the suite")
        return cls(root, {i.env_id: i for i in loaded}, tuple(tasks),
                   {k: v for r in rules.values() for k, v in r.items()}, keys)

    def world(self, *, feedback: str = "user", **kwargs):
        """A :class:`~cfjax.domains.sat.sat_world.SatSmtWorld` over this suite's instances and verifier rules.

        ``feedback``: ``"user"`` (default: errors, unsatisfiable, the violated stated requirements) or
        ``"rich"`` (also whether the problem has a solution, where the world has decided it, and the
        checks passed); other keyword
        arguments go to the worlds."""
        from cfjax.domains.sat.sat_world import SatSmtWorld

        return SatSmtWorld(self.instances, self.rules, feedback=feedback, **kwargs)

    def envs(self) -> dict[str, SATInstance | SMTInstance]:
        return dict(self.instances)

    @property
    def edits(self):
        from cfjax.domains.sat.edits import SatSmtEdits

        return SatSmtEdits()

    def scripted_domain(self):
        from cfjax.domains.sat.script import SatScript

        return SatScript(self.instances, self.keys)
