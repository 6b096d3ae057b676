"""Built-in suites, user suites, and their registry.

>>> suite = build_suite("sql", "/tmp/cfjax-suites/sql")   # writes what the environments need
>>> suite = open_suite("sql", "/tmp/cfjax-suites/sql")    # read-only, safe in worker processes

A user's own tasks (:mod:`cfjax.domains.jsonl`) are named ``jsonl:PATH``. :func:`register_jsonl`
validates the file and returns its suite name, ``jsonl-<stem>``, which every runner then uses like a
built-in name (results directories, reports):

>>> name = register_jsonl("jsonl:tasks/spider_dev.jsonl")     # → "jsonl-spider_dev"
>>> suite = build_suite(name, "/tmp/cfjax-suites/" + name)    # this process registered it
>>> suite = open_suite(name, "/tmp/cfjax-suites/" + name)     # any process: reads the suite root

A suite is all a method needs of a domain: ``suite.tasks``, ``suite.world()`` (the evaluator),
``suite.edits`` (its :class:`~cfjax.types.EditModel`), ``suite.envs()`` and ``suite.scripted_domain()``
(the scripted backbone's view). Each domain's own names are in its package (``cfjax.domains.sql``, …).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from cfjax.domains.base import Suite
from cfjax.infra._lazy import lazy_exports
from cfjax.registry import DOMAINS

# what a new domain or a user suite builds on, imported on first use (PEP 562)
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    ".base": ["KeyedErrorModel", "stratified_splits", "transfer_condition", "TRANSFER_CONDITIONS", "match_cues",
              "exact_cue_parser"],
    ".jsonl": ["JSONLSuite", "JSONLError", "UserDomain", "UserRow", "LoadedFile", "GoldFreeDrafting"],
})
del lazy_exports

__all__ = ["SUITES", "cost_weight", "build_suite", "open_suite", "Suite", "register_jsonl", "is_registered", "suite_base", "is_user_suite",
           "JSONL_PREFIX", *_LAZY]


class _Suites(Mapping[str, str]):
    """Read-only view of :data:`cfjax.registry.DOMAINS`: registered suite name → ``"module:Class"``
    (:attr:`cfjax.types.DomainInfo.suite`), in registration order; a plugin's domain appears in it."""

    def __getitem__(self, name: str) -> str:
        if name not in DOMAINS:
            raise KeyError(name)
        return DOMAINS.get(name).suite

    def __iter__(self) -> Iterator[str]:
        return iter(DOMAINS.names())

    def __len__(self) -> int:
        return len(DOMAINS.names())

    def __repr__(self) -> str:
        return f"SUITES({dict(self)!r})"


#: suite name → "module:class", computed from the registered domains (:data:`cfjax.registry.DOMAINS`)
SUITES: Mapping[str, str] = _Suites()

#: ``--suite jsonl:PATH``
JSONL_PREFIX = "jsonl:"
#: user suites registered in this process: name → the validated file (cfjax.domains.jsonl.LoadedFile)
_USER: dict[str, object] = {}


def _cls(name: str) -> type:
    if name not in DOMAINS:
        raise ValueError(f"unknown suite {name!r} (available: {', '.join(DOMAINS.names())}, or jsonl:PATH)")
    mod, cls = DOMAINS.get(name).suite.split(":")
    return getattr(importlib.import_module(mod), cls)


def is_user_suite(name: str) -> bool:
    """Whether ``name`` is a user suite (``jsonl:PATH`` or the ``jsonl-<stem>`` it registers as)."""
    from cfjax.domains.jsonl import LABEL_PREFIX

    return name.startswith((JSONL_PREFIX, LABEL_PREFIX))


def register_jsonl(spec: str | Path) -> str:
    """Validate a user file (``jsonl:PATH`` or a path) and return its suite name ``jsonl-<stem>``.

    The file is read and checked once (SQL gold queries run on their databases); :func:`build_suite`
    then writes the suite from what this process registered.

    A later registration of another file with the same stem replaces the earlier one (one run
    resolves its suites together and refuses two files with one name).

    Raises:
      cfjax.domains.jsonl.JSONLError: the file, line and field at fault.
      cfjax.config.ConfigError: ``jsonl:`` without a path.
    """
    from cfjax.config import ConfigError
    from cfjax.domains.jsonl import JSONLError, load, suite_label

    text = str(spec)
    raw = text[len(JSONL_PREFIX):] if text.startswith(JSONL_PREFIX) else text
    if not raw:
        raise ConfigError(f"--suite {text!r}: give the file after 'jsonl:' (jsonl:PATH)")
    path = Path(raw).expanduser().resolve()
    name = suite_label(path)
    if not path.is_file():
        raise JSONLError(raw, None, None, "no such file")
    _USER[name] = load(path, label=name)
    return name


def is_registered(name: str) -> bool:
    """Whether ``name`` is a user suite :func:`register_jsonl` registered in this process."""
    return name in _USER


def suite_base(name: str) -> str:
    """The built-in suite whose constants apply to ``name`` (itself for a built-in suite; the domain's
    suite — ``sql``, ``pybugs``, ``sat`` — for a user suite registered in this process)."""
    from cfjax.domains.jsonl import BASE_SUITES

    lf = _USER.get(name)
    return BASE_SUITES[lf.domain] if lf is not None else name  # type: ignore[attr-defined]


def cost_weight(name: str, key: str, default: float = 2.0) -> float:
    """The named cost weight ``key`` (e.g. a runner's relative job cost) that the suite ``name``'s domain
    declares (:attr:`cfjax.types.DomainInfo.cost_weights`); ``default`` for any other suite or key."""
    if name not in DOMAINS:
        return default
    return float(DOMAINS.get(name).cost_weights.get(key, default))


def build_suite(name: str, root: str | Path) -> Suite:
    """Create (idempotently) and return the suite ``name`` under ``root``.

    ``name`` is a built-in suite, ``jsonl:PATH``, or a ``jsonl-<stem>`` name :func:`register_jsonl`
    returned in this process."""
    if name.startswith(JSONL_PREFIX):
        name = register_jsonl(name)
    if is_user_suite(name):
        from cfjax.domains.jsonl import JSONLSuite

        lf = _USER.get(name)
        if lf is None:
            raise ValueError(f"user suite {name!r} is not registered in this process: pass 'jsonl:PATH' "
                             "(or call register_jsonl first)")
        return JSONLSuite.build(Path(root), lf)  # type: ignore[arg-type]
    return _cls(name).build(Path(root))


def open_suite(name: str, root: str | Path) -> Suite:
    """The suite ``name`` that :func:`build_suite` wrote under ``root`` (read-only)."""
    if is_user_suite(name):
        from cfjax.domains.jsonl import JSONLSuite

        label = None if name.startswith(JSONL_PREFIX) else name
        return JSONLSuite.open(Path(root), label=label)
    return _cls(name).open(Path(root))
