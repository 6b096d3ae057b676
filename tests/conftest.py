"""Shared fixtures: the built-in SQL suite is generated once per test session.

Suites and their databases are read-only to every test (evaluations run on
in-memory copies), so one session-wide copy serves all test files.
"""

from __future__ import annotations

import pytest

from cfjax.domains.sql import SQLSuite


@pytest.fixture(scope="session", autouse=True)
def _private_llm_cache(tmp_path_factory):
    """The default LLM response cache of the CLI lives under ``$CFJAX_CACHE_DIR``: point it at this
    session's temporary folder, so no test reads replies another run (or the user) cached."""
    import os

    old = os.environ.get("CFJAX_CACHE_DIR")
    os.environ["CFJAX_CACHE_DIR"] = str(tmp_path_factory.mktemp("llm-cache"))
    yield
    if old is None:
        os.environ.pop("CFJAX_CACHE_DIR", None)
    else:
        os.environ["CFJAX_CACHE_DIR"] = old


@pytest.fixture(scope="session", autouse=True)
def _shared_compile_cache(tmp_path_factory):
    """One JAX compilation cache for this test run, shared by its xdist workers and every process they
    start (CLI subprocesses, spawned ``--workers``, notebook kernels, Ray and distributed workers):
    the same trainer, scorer and beam programs are compiled once per run instead of once per process
    (cfjax.infra.compile_cache; a hit loads the executable a compile would produce, so results do not
    change). It lives under this run's temporary root, so every run — CI's first one included — starts
    cold and no test reads programs another run compiled."""
    import os

    from cfjax.infra import compile_cache

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # popen-gwN's parent: the run's
    saved = {k: os.environ.get(k) for k in (compile_cache.ENV, "JAX_COMPILATION_CACHE_DIR",
                                            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")}
    compile_cache.enable(str(root / "jax-compile-cache"))
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def suite(tmp_path_factory) -> SQLSuite:
    return SQLSuite.build(tmp_path_factory.mktemp("sqlsuite"))


@pytest.fixture(scope="module")
def world(suite):
    w = suite.world()
    yield w
    w.close()


def pytest_collection_modifyitems(config, items):
    """Heaviest modules first (``tests/durations.json``, written by ``tests/durations.py``): with
    ``--dist loadscope`` each module runs on one worker, and handing out the long ones first keeps both
    workers busy to the end instead of leaving one to finish a long module alone. Unknown modules keep
    their collection order after the known ones; the order within a module never changes."""
    import json
    from pathlib import Path

    _skip_domains_without_their_tools(items)
    path = Path(__file__).with_name("durations.json")
    try:
        secs = json.loads(path.read_text())["modules"]
    except (OSError, ValueError, KeyError):
        return
    items.sort(key=lambda it: -float(secs.get(it.nodeid.split("::", 1)[0], 0.0)))


def _skip_domains_without_their_tools(items):
    """A test parametrized by a domain whose system tool is missing here (Coq for math:
    ``DomainInfo.system_check``) is skipped with the domain's one line saying how to install it."""
    from cfjax.registry import DOMAINS

    unusable = {}
    for name in DOMAINS.names():
        ok, line = DOMAINS.get(name).check_system()
        if not ok:
            unusable[name] = line
    if not unusable:
        return
    for item in items:
        spec = getattr(item, "callspec", None)
        hit = [v for v in (spec.params.values() if spec else ()) if isinstance(v, str) and v in unusable]
        if hit:
            item.add_marker(pytest.mark.skip(reason=f"{hit[0]} suite: {unusable[hit[0]]}"))
