"""Generic TOML I/O and type validation for frozen config dataclasses.

:func:`to_dict` / :func:`from_dict` convert any (nested) frozen dataclass to
and from plain dicts; :func:`save_toml` / :func:`load_toml` write and read
them as TOML. :func:`from_dict` checks every value against its field's type
hint before the dataclass is built, so a wrong type is refused with a
:class:`ConfigError` that names the key, not a traceback from deep inside a
run::

    config key 'seeds': expected a list of int, got str "012"
    config key 'store.capacity': expected int, got str "lots"

Supported hints: ``bool`` (an int is refused), ``int`` (a bool is refused),
``float`` (an int is accepted and converted), ``str``, ``tuple[T, ...]`` and
``tuple[T1, T2]`` (from a TOML array, each element checked), nested
dataclasses (TOML tables), ``Mapping[str, T]`` (a TOML table of named ``T``
values, kept as a dict), ``X | None`` and ``Literal[...]``. Range checks
live in each dataclass's ``__post_init__``; their ``ValueError`` is turned
into a :class:`ConfigError` naming the section (``[store]: StoreConfig.capacity
must be ≥ 1, got 0``).

TOML has no null: :func:`save_toml` leaves out fields whose value is
``None``, and loading falls back to the field's default for them.

A section whose keys are not all fixed (e.g. one subtable per registered
domain) defines two hooks: a classmethod ``_config_load(data, prefix)`` that
returns the table to build the dataclass from (called before the key check)
and a method ``_config_dump(d)`` that returns the table :func:`to_dict` writes.
"""

from __future__ import annotations

import math
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

from cfjax.infra.io import UserError, atomic_write_text

__all__ = ["ConfigError", "to_dict", "from_dict", "save_toml", "load_toml"]

T = TypeVar("T")


class ConfigError(UserError, ValueError):
    """A configuration that cannot be loaded; the message is one line naming the key or file.

    A :class:`cfjax.infra.io.UserError`: the ``cfjax`` command prints it as one line and exits 2."""


# --------------------------------------------------------------------------
# dataclass <-> dict
# --------------------------------------------------------------------------
def _plain(v: Any) -> Any:
    if is_dataclass(v) and not isinstance(v, type):
        return to_dict(v)
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return v


def to_dict(cfg: Any) -> dict:
    """Nested plain dict of a config dataclass (tuples become lists, nested configs dicts)."""
    d = {f.name: _plain(getattr(cfg, f.name)) for f in fields(cfg)}
    dump = getattr(cfg, "_config_dump", None)
    return dump(d) if dump is not None else d


def _path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _describe(tp: Any) -> str:
    """How an expected type reads in an error message."""
    origin = get_origin(tp)
    if tp is type(None):
        return "nothing"
    if isinstance(tp, type) and is_dataclass(tp):
        return f"a table ({tp.__name__})"
    if tp in (bool, int, float, str):
        return tp.__name__
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(tp) if a is not type(None)) + (
            " (or left out)" if type(None) in get_args(tp) else "")
    if origin is typing.Literal:
        return "one of " + ", ".join(_show(a) for a in get_args(tp))
    if origin in (dict, Mapping):
        args = get_args(tp)
        return f"a table of {_describe(args[1]) if len(args) == 2 else 'values'}"
    if origin in (tuple, list):
        args = get_args(tp)
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return f"a list of {_describe(args[0]) if args else 'values'}"
        return f"a list of {len(args)} items ({', '.join(_describe(a) for a in args)})"
    return getattr(tp, "__name__", str(tp))


def _show(v: Any) -> str:
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_show(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return repr(v)


def _given(v: Any) -> str:
    """How a given value reads in an error message: its TOML type and value."""
    if v is None:
        return "nothing"
    kind = {bool: "bool", int: "int", float: "float", str: "str", dict: "table", list: "list",
            tuple: "list"}.get(type(v), type(v).__name__)
    text = _show(v)
    if len(text) > 60:
        text = text[:57] + "…"
    return f"{kind} {text}"


def _fail(key: str, tp: Any, v: Any) -> ConfigError:
    return ConfigError(f"config key {key!r}: expected {_describe(tp)}, got {_given(v)}")


def _convert(tp: Any, v: Any, key: str) -> Any:
    """``v`` checked against the hint ``tp`` (and converted: list → tuple, int → float)."""
    origin = get_origin(tp)
    if tp is Any:
        return v
    if isinstance(tp, type) and is_dataclass(tp):
        if isinstance(v, tp):  # already built (by a section's _config_load hook)
            return v
        if not isinstance(v, dict):
            raise _fail(key, tp, v)
        return _build(tp, v, key)
    if tp is type(None):
        if v is None:
            return None
        raise _fail(key, tp, v)
    if tp is bool:
        if isinstance(v, bool):
            return v
        raise _fail(key, tp, v)
    if tp is int:
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise _fail(key, tp, v)
    if tp is float:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        raise _fail(key, tp, v)
    if tp is str:
        if isinstance(v, str):
            return v
        raise _fail(key, tp, v)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if v is None:
            if type(None) in args:
                return None
            raise _fail(key, tp, v)
        for a in args:  # the first member that takes the value (bool before int matters: bool is checked exactly)
            if a is type(None):
                continue
            try:
                return _convert(a, v, key)
            except ConfigError:
                continue
        raise _fail(key, tp, v)
    if origin is typing.Literal:
        allowed = get_args(tp)
        if any(type(v) is type(a) and v == a for a in allowed):
            return v
        raise _fail(key, tp, v)
    if origin in (dict, Mapping):
        if not isinstance(v, dict):
            raise _fail(key, tp, v)
        args = get_args(tp)
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise _fail(key, tp, v)
            out[k] = _convert(args[1], x, f"{key}.{k}") if len(args) == 2 else x
        return out
    if origin in (tuple, list):
        if not isinstance(v, (list, tuple)):
            raise _fail(key, tp, v)
        args = get_args(tp)
        if not args:
            items = list(v)
        elif len(args) == 2 and args[1] is Ellipsis:
            try:
                items = [_convert(args[0], x, f"{key}[{i}]") for i, x in enumerate(v)]
            except ConfigError:
                raise _fail(key, tp, v) from None
        else:
            if len(v) != len(args):
                raise _fail(key, tp, v)
            try:
                items = [_convert(a, x, f"{key}[{i}]") for i, (a, x) in enumerate(zip(args, v))]
            except ConfigError:
                raise _fail(key, tp, v) from None
        return tuple(items) if origin is tuple else items
    if isinstance(tp, type):  # another plain class: accept instances only
        if isinstance(v, tp):
            return v
        raise _fail(key, tp, v)
    return v  # a hint we do not model (a TypeVar, a Protocol…): passed through unchanged


def _build(cls: type[T], data: dict, prefix: str) -> T:
    load = getattr(cls, "_config_load", None)
    if load is not None:
        data = load(dict(data), prefix)
    hints = get_type_hints(cls)
    fs = [f for f in fields(cls) if f.init]  # type: ignore[arg-type]
    names = [f.name for f in fs]
    unknown = [k for k in data if k not in names]
    if unknown:
        where = f"[{prefix}]" if prefix else "the top level"
        keys = ", ".join(repr(_path(prefix, k)) for k in unknown)
        raise ConfigError(f"unknown config key{'s' if len(unknown) > 1 else ''} {keys}; valid keys in {where}"
                          f" ({cls.__name__}): {', '.join(names)}")
    missing = [f.name for f in fs if f.name not in data and f.default is MISSING
               and f.default_factory is MISSING]  # type: ignore[misc]
    if missing:
        where = f"[{prefix}]" if prefix else "the top level"
        raise ConfigError(f"missing config key{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(repr(_path(prefix, k)) for k in missing)} in {where} ({cls.__name__})")
    kwargs = {k: _convert(hints[k], v, _path(prefix, k)) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        msg = _one_line(e)
        if prefix:
            raise ConfigError(f"[{prefix}]: {msg}") from None
        raise ConfigError(msg if msg.startswith(cls.__name__) else f"{cls.__name__}: {msg}") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def from_dict(cls: type[T], data: dict) -> T:
    """Inverse of :func:`to_dict`, with every value checked against its field's type hint.

    Raises:
        ConfigError: a wrong type, an unknown or missing key (the message names
            the full key path, e.g. ``store.capacity``), or a value the
            dataclass's ``__post_init__`` refuses (the message names the section).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"a {cls.__name__} must be a table, got {_given(data)}")
    return _build(cls, data, "")


# --------------------------------------------------------------------------
# TOML text
# --------------------------------------------------------------------------
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_str(s: str) -> str:
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (list, tuple)):
        if any(x is None for x in v):
            raise ConfigError("cannot write a list holding None to TOML")
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ConfigError(f"cannot write {type(v).__name__} to TOML")


def _toml_lines(d: dict, prefix: str) -> list[str]:
    lines = [f"{k} = {_toml_value(v)}" for k, v in d.items() if v is not None and not isinstance(v, dict)]
    for k, v in d.items():
        if isinstance(v, dict):
            lines += ["", f"[{prefix}{k}]"] + _toml_lines(v, f"{prefix}{k}.")
    return lines


def dumps_toml(cfg: Any) -> str:
    """The TOML text of a config dataclass (``None`` fields left out: TOML has no null)."""
    return "\n".join(_toml_lines(to_dict(cfg), "")).lstrip("\n") + "\n"


def save_toml(cfg: Any, path: str | Path) -> None:
    """Write a config dataclass as TOML, atomically (:func:`cfjax.infra.io.atomic_write_text`)."""
    atomic_write_text(Path(path), dumps_toml(cfg))


def load_toml(cls: type[T], path: str | Path) -> T:
    """Read a config written by :func:`save_toml` (or by hand); missing keys keep their defaults.

    Raises:
        ConfigError: a one-line message for a missing file, a directory, a file
            that is not valid TOML, or any error of :func:`from_dict` (prefixed
            with the file's path).
    """
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file not found: {p}")
    if p.is_dir():
        raise ConfigError(f"config path is a directory, not a TOML file: {p}")
    try:
        with open(p, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {_one_line(e)}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror or _one_line(e)}") from None
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None
