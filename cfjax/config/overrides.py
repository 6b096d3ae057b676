"""``--set KEY=VALUE``: one config key overridden on the command line, checked like a TOML file.

``KEY`` is a dotted path into the (nested, frozen) config dataclass — ``agent.max_attempts``,
``store.capacity``, ``dqn.total_decisions``, ``seeds`` — and ``VALUE`` is a TOML value
(``3``, ``0.5``, ``true``, ``[0, 1]``, ``"text"``, ``{k = 1}``); a value that is not valid TOML
is taken as a bare string, so ``--set store.retention=recency`` works without quotes. An inline
table is merged into the section it names, so ``agent={max_attempts = 3}`` keeps the section's
other keys.

The overrides are set into :func:`~cfjax.config.to_dict` of the config and the result is
rebuilt with :func:`~cfjax.config.from_dict`, the TOML loader's own validation: every type is
checked, an unknown section or key is named with the valid ones, and the dataclasses'
``__post_init__`` range checks run. A refusal is one :class:`~cfjax.config.ConfigError` line
naming the override::

    --set agent.max_atempts=3: unknown config key 'agent.max_atempts'; valid keys in [agent] (AgentConfig): ...
    --set store.capacity=lots: config key 'store.capacity': expected int, got str "lots"
    --set agent.max_attempts=0: [agent]: AgentConfig.max_attempts must be ≥ 1, got 0

Later overrides win over earlier ones (``--set seeds=[1] --set seeds=[2]`` gives ``(2,)``).
"""

from __future__ import annotations

import copy
import datetime
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from cfjax.config._toml import ConfigError, _given, from_dict, to_dict

__all__ = ["parse_value", "parse_override", "apply_overrides", "set_keys"]

T = TypeVar("T")


def parse_value(text: str) -> Any:
    """``text`` as a TOML value (``tomllib.loads(f"v = {text}")``), or ``text`` itself when it is
    not one (a bare word, ``1,2``, an empty string) or is a TOML date/time (no config holds one)."""
    try:
        doc = tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return text
    if set(doc) != {"v"}:  # "1\nw = 2": more than one value; keep the text (then refused by type)
        return text
    v = doc["v"]
    if isinstance(v, (datetime.date, datetime.time)):  # datetime.datetime is a date
        return text
    return v


def parse_override(text: str, *, flag: str = "--set") -> tuple[str, Any]:
    """``"section.key=value"`` → ``("section.key", parsed value)`` (:func:`parse_value`).

    Raises:
        ConfigError: no ``=``, or an empty key or key part (``a..b``, ``.a``).
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"{flag} {text}: expected KEY=VALUE with KEY a dotted config key, "
                          "e.g. agent.max_attempts=3")
    parts = [p.strip() for p in key.split(".")]
    if not all(parts):
        raise ConfigError(f"{flag} {text}: empty part in the key {key!r} (expected e.g. agent.max_attempts)")
    return ".".join(parts), parse_value(raw.strip())


def _merge(into: dict, new: dict) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def _assign(d: dict, key: str, value: Any) -> None:
    """Set the dotted ``key`` of the plain dict ``d`` (a config's :func:`to_dict`) to ``value``.

    A missing section is created (then :func:`from_dict` names it if it is unknown); a key path
    through a plain value is refused here."""
    parts = key.split(".")
    node = d
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:  # unknown (from_dict names it) or a section left out: start it empty
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"config key {'.'.join(parts[:i + 1])!r} is a value ({_given(child)}), "
                              f"not a section: {key!r} cannot be set")
        node = child
    leaf = parts[-1]
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
        _merge(node[leaf], copy.deepcopy(value))
    else:
        node[leaf] = copy.deepcopy(value)


def _apply(cfg: T, items: list[tuple[str, str, Any]]) -> T:
    """``cfg`` with every ``(label, key, value)`` set, validated once by :func:`from_dict`; on a
    refusal, the first item whose addition makes the config invalid is named by its label."""
    if not items:
        return cfg
    cls = type(cfg)
    base = to_dict(cfg)

    def build(n: int):
        d = copy.deepcopy(base)
        for label, key, value in items[:n]:
            try:
                _assign(d, key, value)
            except ConfigError as e:
                raise ConfigError(f"{label}: {e}") from None
        return from_dict(cls, d)

    try:
        return build(len(items))
    except ConfigError as err:
        first = err
    try:
        build(0)
    except ConfigError as e:  # the config itself does not rebuild (not a TOML-round-tripping config)
        raise ConfigError(f"cannot override {cls.__name__}: {e}") from None
    for n in range(1, len(items) + 1):  # the shortest prefix the config refuses: its last item is the culprit
        try:
            build(n)
        except ConfigError as e:
            msg = str(e)
            label = items[n - 1][0]
            raise ConfigError(msg if msg.startswith(f"{label}: ") else f"{label}: {msg}") from None
    raise first  # pragma: no cover  (the full list is a prefix)


def apply_overrides(cfg: T, overrides: Iterable[str] | None, *, flag: str = "--set") -> T:
    """``cfg`` with each ``KEY=VALUE`` of ``overrides`` applied in order (module docstring).

    ``apply_overrides(CounterMemConfig(), ["agent.max_attempts=3", "store.capacity=100"])``.
    Returns ``cfg`` itself when there is nothing to apply.

    Raises:
        ConfigError: one line, ``"{flag} KEY=VALUE: <the TOML loader's reason>"``.
    """
    items = []
    for text in overrides or ():
        key, value = parse_override(text, flag=flag)
        items.append((f"{flag} {text}", key, value))
    return _apply(cfg, items)


def set_keys(cfg: T, changes: Mapping[str, Any], *, label: str = "config key") -> T:
    """``cfg`` with already-parsed dotted-key ``changes`` applied (a sweep grid's ``base`` and
    points), validated like :func:`apply_overrides`; an error starts ``"{label} 'KEY': "``."""
    return _apply(cfg, [(f"{label} {k!r}", k, v) for k, v in changes.items()])
