"""Bring-your-own tasks: ``--suite jsonl:PATH`` loads a user's tasks for a built-in domain.

One JSON object per line; blank lines and lines starting with ``#`` or ``//`` are skipped. Every
line names its domain in a ``"domain"`` field (``"sql"``, ``"python"`` or ``"sat"``), and every
line of a file must name the same one; a HumanEvalPack row as published (``buggy_solution``,
``entry_point``, ``test``, no ``domain``) is a ``python`` line. The domain's fields are documented by its loader:

* ``sql`` (:mod:`cfjax.domains.sql.user`) — Spider rows (``db_id``, ``question``, ``query``) and
  BIRD rows (``db_id``, ``question``, ``SQL``, ``evidence``) over a sqlite file (``db_path``, or
  ``db_id`` + ``db_dir``);
* ``python`` (:mod:`cfjax.domains.python.user`) — a buggy program (``source`` or ``source_path``)
  with QuixBugs-style input/output ``cases``, a ``tests_path`` file or a check program (``test``);
  the fix (``fix``) is optional; or a HumanEvalPack row as it is (``prompt``, ``buggy_solution``,
  ``canonical_solution``, ``test`` with ``check(candidate)``, ``entry_point``);
* ``sat`` (:mod:`cfjax.domains.sat.user`) — an encoding task over an instance of the SAT/SMT world
  (``instance``), the verifier's ``rules`` (the checker settings) and optionally an encoding to
  repair (``start``); or a DIMACS CNF formula (``dimacs`` / ``dimacs_path``) to *answer*: the action
  is a satisfying assignment (``v 1 -2 3 0``), checked clause by clause, or the claim ``UNSAT``,
  checked by the solver (optional ``expect: "sat" | "unsat"``, an answer key for analysis; the
  loader warns when the formula cannot be solved as stated).

Fields every domain accepts (all optional):

============  =====================================================================================
``id``        the task's id within the file (also ``question_id``, ``task_id``); default: the line
              number. Ids must be unique (after replacing characters other than letters, digits,
              ``_`` and ``-`` by ``_``).
``env``       the environment id (default: the database, the program, the instance)
``split``     ``build`` | ``train`` | ``val`` | ``eval``: fixes the task's split (below)
``family``    an analysis label (SQL default: BIRD's ``difficulty``, else ``"user"``)
``variant``   ``base`` (default) | ``look_alike`` | ``new_surface``: the transfer condition
              of App. D.4 the task tests, when the user knows it
============  =====================================================================================

Other fields are ignored (Spider's ``query_toks``, BIRD's ``difficulty`` where not used, ...).

**Splits.** Tasks with a ``split`` field go to that split. The others are split by
:func:`~cfjax.domains.base.stratified_splits` with the split seed (twins — same environment, same
gold — stay together; a task without a gold is its own twin group): 35 % build, 30 % eval, the rest
train, of which the validation subset is ``min(n_val, len(train) // 3)`` tasks (at least 1), so a
small file still has every split. The *new environment* condition needs an environment no build
or train task touched: with three or more environments, the one with the fewest tasks (ties
broken by a stable hash of its id) is held out to ``eval`` when it has at most 20 % of the tasks
that have no ``split`` field. Transfer conditions then follow
:func:`~cfjax.domains.base.transfer_condition` (``same_env`` / ``new_env``, or the ``variant``).

**Errors.** A bad file raises :class:`JSONLError` (a :class:`~cfjax.config.ConfigError`: the
``cfjax`` command prints it as one line and exits 2) naming the file, the line and the field at
fault: not JSON, not an object, a missing field or one of the wrong type, an unknown or mixed
domain, a missing sqlite / tests / source file, a gold query that fails on its database,
duplicate ids, an empty file.

**Where it lives.** :func:`load` reads and validates a file (SQL gold queries run once, read-only,
on their databases). :meth:`JSONLSuite.build` writes what the worlds need under the suite root —
a copy of the file (``tasks.jsonl``), a manifest (``suite.json``) and, for Python, the rendered test
files — and :meth:`JSONLSuite.open` reads only that root (worker processes open the suite there).
The user's files are only ever read: databases are opened read-only by the SQL world.

**Scripted backbone.** A user's gold answers stay with the world: the scripted simulator of a
user suite is each domain's *gold-free* drafter (``UserSQLScript``, ``UserPyScript``,
``UserSatScript``, in ``cfjax.domains.<domain>.user_draft``; their shared mixin is
:class:`cfjax.domains.drafting.GoldFreeDrafting`), which holds no answer key and reads only what a
real model's prompt shows (question, context, observable attributes). Those modules are marked
agent-side (:data:`cfjax.types.AGENT_SIDE_MARKER`): the answer-key guard watches them. Its drafts are a template query (SQL) or one seeded
rule edit of the program / encoding the line gives (Python, SAT; a DIMACS formula without a start:
an answer by unit propagation and a seeded descent, documented in ``cfjax.domains.sat.user_draft``);
it knows no true fix, so Module
I's alternatives are rule edits that only the world tells apart. The competence table of
:mod:`cfjax.llm.scripted` (``p_error``, ``p_propose_fix``) does not apply — there is no key to
slip from; ``p_noise``, memory following, distillation, the judge and the writers work as
documented there. Its figures are labelled as the scripted backbone's, like every other: they
exercise the pipeline on the user's tasks; a real backbone (``--backbone openai`` / ``hf:PATH``)
measures a model.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfjax.config import ConfigError
from cfjax.domains.base import Suite, stratified_splits
from cfjax.domains.drafting import GoldFreeDrafting
from cfjax.types import AnswerKey, Splits, Task

__all__ = ["JSONLError", "JSONLSuite", "Parsed", "UserRow", "UserDomain", "GoldFreeDrafting", "RowReader", "load", "LoadedFile", "suite_label",
           "DOMAINS", "BASE_SUITES", "SPLIT_NAMES", "PREFIX", "LABEL_PREFIX", "FORMAT", "safe_id"]

#: ``--suite jsonl:PATH``
PREFIX = "jsonl:"
#: a user suite's name (results directories, reports): ``jsonl-<file stem>``
LABEL_PREFIX = "jsonl-"
#: the manifest format written under a suite root
FORMAT = "cfjax-jsonl/1"
#: domain → the module of its loader (each defines ``DOMAIN``, a :class:`UserDomain` subclass)
DOMAINS: dict[str, str] = {"sql": "cfjax.domains.sql.user", "python": "cfjax.domains.python.user",
                           "sat": "cfjax.domains.sat.user", "math": "cfjax.domains.math.user"}
#: domain → the built-in suite whose constants (utility, retrieval cap, sandbox policy) apply
BASE_SUITES: dict[str, str] = {"sql": "sql", "python": "pybugs", "sat": "sat", "math": "math"}
SPLIT_NAMES = ("build", "train", "val", "eval")
_VARIANTS = ("base", "look_alike", "new_surface")
_ID_FIELDS = ("id", "question_id", "task_id")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: the held-out environment may hold at most this share of the tasks split by seed
_HOLDOUT_MAX_SHARE = 0.2
#: a line with these fields and no ``domain`` is a HumanEvalPack row: ``"python"``
_HUMANEVALPACK_FIELDS = frozenset({"buggy_solution", "entry_point", "test"})


class JSONLError(ConfigError):
    """A user task file that cannot be loaded: the message names the file, the line and the field."""

    def __init__(self, path: str | Path, line: int | None, field_name: str | None, message: str) -> None:
        where = f"{path}" + (f":{line}" if line is not None else "")
        what = f" field {field_name!r}:" if field_name else ""
        super().__init__(f"{where}:{what} {message}")
        self.path, self.line, self.field, self.reason = str(path), line, field_name, message


def safe_id(text: str) -> str:
    """``text`` with characters other than letters, digits, ``_`` and ``-`` replaced by ``_``."""
    out = _UNSAFE.sub("_", text.strip())
    return out or "_"


def suite_label(path: str | Path) -> str:
    """The suite name of a user file: ``jsonl-<stem>`` (safe as a directory name)."""
    return LABEL_PREFIX + safe_id(Path(path).stem)


# --------------------------------------------------------------------------- reading rows


class RowReader:
    """Typed access to one line's fields; every failure is a :class:`JSONLError` naming the line."""

    def __init__(self, path: Path, line: int, row: Mapping[str, Any], base_dir: Path) -> None:
        self.path, self.line, self.row, self.base_dir = path, line, row, base_dir

    def error(self, field_name: str | None, message: str) -> JSONLError:
        return JSONLError(self.path, self.line, field_name, message)

    def has(self, name: str) -> bool:
        return self.row.get(name) is not None

    def first(self, names: Sequence[str]) -> str | None:
        """The first of ``names`` present (not null) on the line, or ``None``."""
        return next((n for n in names if self.has(n)), None)

    def get(self, name: str, kind: type | tuple[type, ...], *, required: bool = True, default: Any = None,
            what: str | None = None) -> Any:
        """The field ``name`` checked to be of ``kind`` (``bool`` is never an ``int``)."""
        if not self.has(name):
            if required:
                raise self.error(name, f"missing ({what or 'required'})")
            return default
        value = self.row[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(value, kinds)
        if not ok:
            names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise self.error(name, f"must be {names}, got {_TYPE_NAMES.get(type(value), type(value).__name__)}")
        return value

    def text(self, name: str, *, required: bool = True, default: str | None = None, nonempty: bool = True) -> Any:
        value = self.get(name, str, required=required, default=default)
        if value is not None and nonempty and not value.strip():
            raise self.error(name, "must not be empty")
        return value

    def file(self, name: str, value: str | None = None, *, kind: str = "file") -> Path:
        """The path of field ``name`` (``value`` if given), relative to the JSONL file's folder; it must exist."""
        raw = self.text(name) if value is None else value
        p = Path(raw).expanduser()
        p = (p if p.is_absolute() else self.base_dir / p).resolve()
        if not p.is_file():
            raise self.error(name, f"{kind} not found: {p}")
        return p

    def read_text(self, name: str, *, kind: str = "file") -> tuple[Path, str]:
        p = self.file(name, kind=kind)
        try:
            return p, p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise self.error(name, f"cannot read {p}: {e}") from None


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
               dict: "an object", type(None): "null"}


@dataclass(frozen=True)
class Parsed:
    """What a domain reads from one line (before the common fields)."""

    question: str
    env: str
    context: str
    attrs: dict
    #: the gold action, ``""`` when the line has none
    gold: str = ""
    ordered: bool = False
    extra: dict = field(default_factory=dict)
    payload: Any = None
    family: str = "user"
    #: ``Task.domain`` (the action language), default the file's domain
    task_domain: str | None = None


@dataclass(frozen=True)
class UserRow:
    """One line, loaded: the task an agent sees, its answer key (the world's), and domain data."""

    line: int
    task: Task
    key: AnswerKey
    split: str | None
    #: ``True`` when the line gives a gold action (twins are grouped by it in the splits)
    has_gold: bool
    payload: Any = None


class UserDomain(ABC):
    """A domain's loader for user rows and what its suite needs (world, environments, edits,
    the gold-free scripted error model). Subclasses live in ``cfjax.domains.<domain>.user``."""

    #: the ``domain`` field's value
    name: str = "abstract"

    @abstractmethod
    def parse(self, r: RowReader) -> "Parsed":
        """One line's domain fields. Raises :class:`JSONLError` naming the field at fault."""

    def finish(self, rows: Sequence[UserRow], path: Path, *, check: bool) -> None:
        """Cross-row checks and the domain's state (environments). ``check``: also run what is costly
        (SQL gold queries) — done once, when the file is first loaded, not in worker processes."""

    def write(self, rows: Sequence[UserRow], root: Path) -> None:
        """Write what the world needs under ``root`` (idempotent, atomic)."""

    def verify(self, rows: Sequence[UserRow], root: Path) -> None:
        """Check that :meth:`write` wrote what :meth:`world` reads (``open``)."""

    @abstractmethod
    def world(self, root: Path, keys: Mapping[str, AnswerKey], **kwargs) -> object: ...

    @abstractmethod
    def envs(self) -> Mapping[str, object]: ...

    @property
    @abstractmethod
    def edits(self): ...

    @abstractmethod
    def scripted_domain(self, tasks: Sequence[Task]): ...


def _domain(name: str) -> UserDomain:
    return importlib.import_module(DOMAINS[name]).DOMAIN()


@dataclass(frozen=True)
class LoadedFile:
    """A validated user file: its rows and the domain's loader state."""

    path: Path
    label: str
    text: str
    sha256: str
    domain: str
    rows: tuple[UserRow, ...]
    loader: UserDomain = field(repr=False)


def _lines(path: Path, text: str) -> list[tuple[int, dict]]:
    out = []
    for i, raw in enumerate(text.split("\n"), 1):  # not splitlines(): U+2028 may sit inside a JSON string
        s = raw.strip()
        if not s or s.startswith(("#", "//")):
            continue
        try:
            row = json.loads(s)
        except json.JSONDecodeError as e:
            raise JSONLError(path, i, None, f"not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(row, dict):
            got = _TYPE_NAMES.get(type(row), type(row).__name__)
            raise JSONLError(path, i, None, f"a line must be one JSON object, got {got}")
        out.append((i, row))
    if not out:
        raise JSONLError(path, None, None, "the file holds no tasks (empty, or only blank and comment lines)")
    return out


def load(path: str | Path, *, label: str | None = None, text: str | None = None, base_dir: str | Path | None = None,
         check: bool = True) -> LoadedFile:
    """Read and validate a user task file (module docstring).

    Args:
      path: the JSONL file (its folder resolves relative paths unless ``base_dir`` is given).
      label: the suite name (default :func:`suite_label`).
      text: the file's text if already read (a suite root's copy).
      check: also run the costly checks (SQL gold queries on their databases).

    Raises:
      JSONLError: naming the line and field at fault.
    """
    path = Path(path)
    if text is None:
        if not path.is_file():
            raise JSONLError(path, None, None, "no such file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise JSONLError(path, None, None, f"cannot read the file: {e}") from None
    label = label or suite_label(path)
    base = Path(base_dir) if base_dir is not None else path.resolve().parent
    lines = _lines(path, text)
    domain = None
    for i, row in lines:
        d = row.get("domain")
        if d is None and _HUMANEVALPACK_FIELDS <= row.keys():
            d = "python"  # a HumanEvalPack row as published (cfjax.domains.python.user)
        if d is None:
            raise JSONLError(path, i, "domain", f"missing (one of: {', '.join(DOMAINS)})")
        if not isinstance(d, str) or d not in DOMAINS:
            raise JSONLError(path, i, "domain", f"unknown domain {d!r} (one of: {', '.join(DOMAINS)})")
        if domain is None:
            domain, first = d, i
        elif d != domain:
            raise JSONLError(path, i, "domain", f"{d!r} differs from {domain!r} on line {first}: one domain per file")
    assert domain is not None
    loader = _domain(domain)
    rows: list[UserRow] = []
    seen: dict[str, int] = {}
    for i, row in lines:
        r = RowReader(path, i, row, base)
        p = loader.parse(r)
        env = safe_id(r.text("env") if r.has("env") else p.env)
        id_field = r.first(_ID_FIELDS)
        raw_id = r.get(id_field, (str, int)) if id_field else f"L{i:05d}"
        if isinstance(raw_id, str) and not raw_id.strip():
            raise r.error(id_field, "must not be empty")
        tid_local = safe_id(str(raw_id))
        if tid_local in seen:
            raise JSONLError(path, i, id_field or "id", f"duplicate task id {raw_id!r} (also on line {seen[tid_local]})")
        seen[tid_local] = i
        split = r.get("split", str, required=False)
        if split is not None and split not in SPLIT_NAMES:
            raise r.error("split", f"must be one of {', '.join(SPLIT_NAMES)}, got {split!r}")
        variant = r.get("variant", str, required=False, default="base")
        if variant not in _VARIANTS:
            raise r.error("variant", f"must be one of {', '.join(_VARIANTS)}, got {variant!r}")
        family = safe_id(r.text("family")) if r.has("family") else p.family
        tid = f"{label}/{env}/{tid_local}"
        task = Task(tid, p.question, env, p.context, dict(p.attrs, env=env), domain=p.task_domain or domain)
        key = AnswerKey(tid, p.gold, family, variant, p.ordered, p.extra)
        rows.append(UserRow(i, task, key, split, bool(p.gold), p.payload))
    loader.finish(rows, path, check=check)
    return LoadedFile(path, label, text, hashlib.sha256(text.encode()).hexdigest(), domain, tuple(rows), loader)


# --------------------------------------------------------------------------- the suite


def _holdout(tasks: Sequence[Task]) -> tuple[str, ...]:
    counts = Counter(t.env_id for t in tasks)
    if len(counts) < 3:
        return ()
    env = min(counts, key=lambda e: (counts[e], hashlib.sha256(e.encode()).hexdigest()))
    return (env,) if counts[env] <= _HOLDOUT_MAX_SHARE * len(tasks) else ()


@dataclass(frozen=True)
class JSONLSuite(Suite):
    """A user's tasks for one built-in domain (module docstring).

    Attributes:
      root: the suite root (manifest, a copy of the file, the domain's files).
      name: the suite's name (``jsonl-<stem>``).
      domain: ``sql`` | ``python`` | ``sat``.
      source: the user's file the suite was built from.
      tasks, keys: the tasks and their answer keys.
      fixed: ``task_id → split`` for the lines with a ``split`` field.
      holdout_envs: the environment held out to ``eval`` (new-environment condition), if any.
    """

    root: Path
    domain: str
    source: Path
    tasks: tuple[Task, ...]
    keys: dict[str, AnswerKey]
    fixed: dict[str, str]
    has_gold: dict[str, bool]
    loader: UserDomain = field(repr=False, compare=False)
    # the Suite class attributes, per instance here (dataclass fields with defaults come last)
    name: str = "jsonl"
    holdout_envs: tuple[str, ...] = ()

    @property
    def base(self) -> str:
        """The built-in suite whose constants apply (utility, retrieval cap, sandbox policy)."""
        return BASE_SUITES[self.domain]

    @classmethod
    def _make(cls, root: Path, lf: LoadedFile, source: Path) -> "JSONLSuite":
        tasks = tuple(r.task for r in lf.rows)
        free = [r.task for r in lf.rows if r.split is None]
        return cls(root, lf.domain, source, tasks, {r.task.task_id: r.key for r in lf.rows},
                   {r.task.task_id: r.split for r in lf.rows if r.split is not None},
                   {r.task.task_id: r.has_gold for r in lf.rows}, lf.loader, name=lf.label,
                   holdout_envs=_holdout(free))

    @classmethod
    def build(cls, root: str | Path, source: str | Path | LoadedFile, *, label: str | None = None) -> "JSONLSuite":
        """Validate ``source`` (a path or a :func:`load` result) and write the suite under ``root``:
        ``suite.json``, ``tasks.jsonl`` and the domain's files (idempotent, atomic)."""
        from cfjax.infra.io import atomic_write_json, atomic_write_text

        lf = source if isinstance(source, LoadedFile) else load(source, label=label)
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        lf.loader.write(lf.rows, root)
        copy = root / "tasks.jsonl"
        if not copy.is_file() or copy.read_text(encoding="utf-8") != lf.text:
            atomic_write_text(copy, lf.text)
        manifest = {"format": FORMAT, "label": lf.label, "domain": lf.domain, "source": str(lf.path.resolve()),
                    "base_dir": str(lf.path.resolve().parent), "sha256": lf.sha256, "tasks": len(lf.rows)}
        atomic_write_json(root / "suite.json", manifest)
        return cls._make(root, lf, lf.path.resolve())

    @classmethod
    def open(cls, root: str | Path, *, label: str | None = None) -> "JSONLSuite":
        """The suite :meth:`build` wrote under ``root`` (read-only; safe in worker processes)."""
        from cfjax.infra.io import read_json

        root = Path(root)
        mpath = root / "suite.json"
        if not mpath.is_file():
            raise FileNotFoundError(f"no user suite under {root} (no suite.json); build it with "
                                    f"cfjax.domains.build_suite('jsonl:PATH', {str(root)!r})")
        m = read_json(mpath)
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise ValueError(f"{mpath}: not a user suite manifest (format {FORMAT!r} expected)")
        if label is not None and m["label"] != label:
            raise ValueError(f"{mpath}: the suite under {root} is {m['label']!r}, not {label!r}")
        text = (root / "tasks.jsonl").read_text(encoding="utf-8")
        if hashlib.sha256(text.encode()).hexdigest() != m["sha256"]:
            raise ValueError(f"{root / 'tasks.jsonl'}: its content differs from the manifest; rebuild the suite")
        lf = load(Path(m["source"]), label=m["label"], text=text, base_dir=m["base_dir"], check=False)
        lf.loader.verify(lf.rows, root)
        return cls._make(root, lf, Path(m["source"]))

    # ----------------------------------------------------------------- Suite
    def splits(self, *, seed: int = 12345, eval_frac: float = 0.3, build_frac: float = 0.35, n_val: int = 20,
               holdout_envs: Sequence[str] | None = None) -> Splits:
        """Build / train / val / eval (module docstring, "Splits"): the file's ``split`` fields, the
        rest by :func:`stratified_splits` with ``seed``; the validation subset is capped at a third
        of the training tasks so a small file keeps every split non-empty."""
        free = [t for t in self.tasks if t.task_id not in self.fixed]
        holdout = tuple(self.holdout_envs if holdout_envs is None else holdout_envs)
        by_split: dict[str, list[Task]] = defaultdict(list)
        for t in self.tasks:
            if t.task_id in self.fixed:
                by_split[self.fixed[t.task_id]].append(t)
        if free:
            # twins by gold where a line has one; a line without a gold is its own group
            proxy = {t.task_id: AnswerKey(t.task_id, self.keys[t.task_id].gold if self.has_gold[t.task_id]
                                          else "\0" + t.task_id, self.keys[t.task_id].family,
                                          self.keys[t.task_id].variant) for t in free}
            try:
                sp = stratified_splits(free, proxy, seed=seed, eval_frac=eval_frac, build_frac=build_frac, n_val=0,
                                       holdout_envs=[e for e in holdout if any(t.env_id == e for t in free)],
                                       normalize=self.edits.normalize)
            except ValueError as e:
                raise ConfigError(f"{self.name}: {len(free)} tasks without a 'split' field are too few to split into "
                                  f"build/train/val/eval ({e}; tasks with the same environment and gold are one "
                                  "unit); add tasks (about 12 or more) or give the splits with the 'split' field"
                                  ) from None
            train = list(sp.train)
            k = min(n_val, len(train) // 3) if n_val > 0 else 0
            if n_val > 0 and k == 0 and len(train) >= 2:
                k = 1
            by_split["build"] += sp.build
            by_split["val"] += train[:k]
            by_split["train"] += train[k:]
            by_split["eval"] += sp.eval
        empty = [s for s in SPLIT_NAMES if not by_split[s] and not (s == "val" and n_val <= 0)]
        if empty:
            raise ConfigError(f"{self.name}: {len(self.tasks)} tasks are too few: the split(s) {', '.join(empty)} "
                              "would be empty; add tasks (about 12 or more) or give those splits with the 'split' field")
        return Splits(tuple(by_split["build"]), tuple(by_split["train"]), tuple(by_split["val"]),
                      tuple(by_split["eval"]))

    def world(self, *, feedback: str = "user", **kwargs):
        """The domain's world over this suite (``feedback`` and other options as the built-in suite's)."""
        return self.loader.world(self.root, self.keys, feedback=feedback, **kwargs)

    def envs(self) -> Mapping[str, object]:
        return self.loader.envs()

    @property
    def edits(self):
        return self.loader.edits

    def scripted_domain(self):
        """The domain's *gold-free* scripted error model (module docstring): it never holds a key."""
        return self.loader.scripted_domain(self.tasks)
