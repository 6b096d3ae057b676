"""cfjax.registry: the rules every extension point shares (names, duplicates, copies, worker hand-over)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from cfjax.registry import (DuplicatePluginError, Registry, UnknownPluginError, in_process_registrations,
                            restore_registrations)


@dataclasses.dataclass(frozen=True)
class _Info:
    name: str
    weight: float


@pytest.fixture
def reg():
    r: Registry[_Info] = Registry("test thing")
    yield r
    for n in list(r._items):
        r.unregister(n)


def test_names_duplicates_and_equal_copies(reg):
    a = reg.register("a", _Info("a", 1.0))
    assert reg.get("a") is a and "a" in reg and reg.names()[-1] == "a"
    assert reg.register("a", _Info("a", 1.0)) is a  # an equal copy (a worker's restored one): a no-op
    with pytest.raises(DuplicatePluginError, match="'a' is registered twice"):
        reg.register("a", _Info("a", 2.0))
    assert reg.register("a", _Info("a", 2.0), replace=True).weight == 2.0
    with pytest.raises(UnknownPluginError, match=r"unknown test thing 'b' \(registered: a\)"):
        reg.get("b")
    for bad in ("", "two words", 3):
        with pytest.raises(ValueError, match="non-empty string without spaces"):
            reg.register(bad, _Info("x", 0.0))  # type: ignore[arg-type]


def test_in_process_registrations_travel_by_value_and_restore_only_free_names(reg):
    reg.register("mine", _Info("mine", 0.5))
    got = [e for e in in_process_registrations() if e[0] == "test thing"]
    assert got == [("test thing", "mine", _Info("mine", 0.5))]
    back = pickle.loads(pickle.dumps(got))  # what a spawned worker receives
    reg.unregister("mine")
    assert not [e for e in in_process_registrations() if e[0] == "test thing"]
    reg.register("mine", _Info("mine", 9.0))  # a worker that already has the name keeps its own
    restore_registrations(back)
    assert reg.get("mine").weight == 9.0
    reg.unregister("mine")
    restore_registrations(back)
    assert reg.get("mine") == _Info("mine", 0.5)
