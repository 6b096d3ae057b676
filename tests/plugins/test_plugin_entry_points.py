"""Issue 21, plugin proof (2): a throwaway distribution installed on the path — a package plus its
``*.dist-info`` with a ``[cfjax.plugins]`` entry point — is found by a fresh interpreter: its domain and
its memory system appear in the registries, ``--suite`` and ``--rows``, and run; spawned worker
processes see them too (unlike an in-process registration); a broken entry point is one clear error.

The package, ``cfjax_toyplug`` (written by :func:`write_plugin`), declares two entry points:

* ``toylist = tests.plugins.toydomain`` — a module: importing it registers the test-only domain;
* ``toyplug = cfjax_toyplug:register`` — a callable: it registers a domain of its own, ``toyplug``
  (the toylist classes under another name), and a memory system, ``last_lesson``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cfjax.registry import PluginLoadError, load_plugins

REPO = Path(__file__).resolve().parents[2]

PLUGIN_INIT = '''
"""A throwaway cfjax plugin: a domain (``toyplug``) and a memory system (``last_lesson``)."""

from cfjax.memory import MemorySystemInfo
from cfjax.registry import DOMAINS, MEMORY_SYSTEMS
from cfjax.types import DomainInfo

from tests.plugins.toydomain import INFO as _TOY
from tests.plugins.toydomain.suite import ToyListSuite
from cfjax_toyplug.memory import LastLessonSystem


class ToyPlugSuite(ToyListSuite):
    """The toylist tasks under this plugin's own suite name."""

    name = "toyplug"


DOMAIN = DomainInfo(name="toyplug", suite="cfjax_toyplug:ToyPlugSuite", languages=_TOY.languages,
                    utility=_TOY.utility, k_cap=_TOY.k_cap, description="toyplug: a domain from an entry point")
SYSTEM = MemorySystemInfo("last_lesson", LastLessonSystem, show="revise",
                          runners=("countermem", "antipersist", "compare"),
                          description="the last one-step fix seen, always shown (an entry-point plugin)")


def register():
    DOMAINS.register(DOMAIN.name, DOMAIN)  # the same objects every call: registering twice is a no-op
    MEMORY_SYSTEMS.register(SYSTEM.name, SYSTEM)
'''

PLUGIN_MEMORY = '''
"""``last_lesson``: remembers the last one-step fix it saw (a failed attempt, then a better one that
differs in one decision unit) and shows it with every draft. It reads only its own attempts and the
evaluator's scores, so it is agent-side code: the answer-key guard watches it."""

import json

from cfjax.memory import FrozenMemoryError
from cfjax.types import MemoryText

__cfjax_agent_side__ = True


class LastLessonSystem:
    def __init__(self, ctx):
        self.ctx = ctx
        self.lesson = None  # (unit before, unit after)
        self.seen = 0
        self.frozen = False

    def _learn(self, exp):
        self.seen += 1
        for a, b in zip(exp.attempts, exp.attempts[1:]):
            if b.score > a.score:
                d = self.ctx.edits.diff_units(a.action, b.action)
                if d is not None:
                    self.lesson = (d[1].text, d[2].text)

    def build(self, experience):
        for exp in experience:
            self.update(exp)

    def update(self, experience):
        if self.frozen:
            raise FrozenMemoryError("last_lesson is frozen")
        self._learn(experience)

    def recall(self, query):
        if self.lesson is None:
            return None
        return MemoryText("record", f"EDIT: {self.lesson[0]} -> {self.lesson[1]}")

    def freeze(self):
        self.frozen = True

    def unfreeze(self):
        self.frozen = False

    def save(self, path):
        path.write_text(json.dumps({"lesson": self.lesson, "seen": self.seen}))

    def load(self, path):
        d = json.loads(path.read_text())
        self.lesson = tuple(d["lesson"]) if d["lesson"] else None
        self.seen = int(d["seen"])

    def summary(self):
        return {"lessons": int(self.lesson is not None), "episodes": self.seen}
'''


def write_dist(site: Path, name: str, entry_points: str, files: dict[str, str]) -> Path:
    """A minimal installed distribution under ``site``: its files and ``<name>-0.1.dist-info`` with
    ``METADATA`` and ``entry_points.txt`` (what ``importlib.metadata`` reads)."""
    for rel, text in files.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip())
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points).lstrip())
    return site


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    return write_dist(tmp_path_factory.mktemp("site"), "cfjax_toyplug", """
        [cfjax.plugins]
        toylist = tests.plugins.toydomain
        toyplug = cfjax_toyplug:register
        """, {"cfjax_toyplug/__init__.py": PLUGIN_INIT, "cfjax_toyplug/memory.py": PLUGIN_MEMORY})


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory) -> Path:
    return write_dist(tmp_path_factory.mktemp("broken"), "cfjax_broken", """
        [cfjax.plugins]
        broken = cfjax_broken_plugin:register
        """, {"cfjax_broken_plugin.py": "raise RuntimeError('this plugin is broken on purpose')\n"})


def fresh(site: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python *args`` in a fresh interpreter with ``site`` (and the repository, for ``tests.plugins``)
    on ``PYTHONPATH``, as an installed plugin would be."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


# --------------------------------------------------------------------------- discovery


def test_a_fresh_interpreter_registers_the_entry_points_plugins(plugin_site):
    code = ("import json; from cfjax.registry import DOMAINS, MEMORY_SYSTEMS, ENTRY_POINT_GROUP;"
            "from importlib.metadata import entry_points;"
            "print(json.dumps({'eps': sorted(e.name for e in entry_points(group=ENTRY_POINT_GROUP)),"
            "'domains': DOMAINS.names(), 'systems': MEMORY_SYSTEMS.names(),"
            "'suite': DOMAINS.get('toyplug').suite}))")
    p = fresh(plugin_site, "-c", code)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["eps"] == ["toylist", "toyplug"]
    assert got["domains"][:3] == ["sql", "pybugs", "sat"] and {"toylist", "toyplug"} <= set(got["domains"])
    assert "last_lesson" in got["systems"] and got["suite"] == "cfjax_toyplug:ToyPlugSuite"


def test_the_help_of_countermem_run_lists_them(plugin_site):
    p = fresh(plugin_site, "-m", "cfjax.cli", "countermem", "run", "--help")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    text = text[text.index("options:"):]  # the option list, not the usage line
    suite = text[text.index("--suite SUITE"):text.index("--rows ROWS")]
    rows = text[text.index("--rows ROWS"):text.index("--out OUT")]
    assert "| toylist |" in suite and "| toyplug |" in suite, suite
    assert " last_lesson" in rows, rows


# --------------------------------------------------------------------------- running


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and 0.0 <= x <= 100.0


def test_countermem_runs_the_plugin_domain_with_the_plugin_memory_system(plugin_site, tmp_path):
    out = tmp_path / "cm"
    p = fresh(plugin_site, "-m", "cfjax.cli", "countermem", "run", "--quick", "--suite", "toyplug", "--rows",
              "last_lesson", "--out", str(out), "--workers", "1", "--no-progress")
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    (unit,) = res["units"]
    assert res["suites"] == ["toyplug"] and unit["suite"] == "toyplug"
    assert "last_lesson" in unit["rows"] and set(unit["rows"]) >= {"none", "cf_memory"}
    row = unit["rows"]["last_lesson"]
    assert _finite(row["success"]) and row["n_tasks"] == len(unit["eval_ids"]) > 0
    assert len(unit["outcomes"]["last_lesson"]) == len(unit["eval_ids"])
    assert "last_lesson" in (out / "report.txt").read_text()


@pytest.mark.slow
def test_spawned_workers_see_the_entry_points_plugins(plugin_site, tmp_path):
    """The limitation of an in-process registration (test_plugin_toydomain.py's xfail) is gone with the
    entry point: each spawned worker loads ``cfjax.plugins`` itself. Two jobs on two workers, one of them
    the plugin's memory system, on the toylist domain (the entry point's module form)."""
    out = tmp_path / "ap"
    p = fresh(plugin_site, "-m", "cfjax.cli", "antipersist", "run", "--quick", "--suite", "toylist", "--rows",
              "no_memory", "last_lesson", "--iterations", "1", "--max-tasks", "8", "--out", str(out),
              "--workers", "2")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "2 worker(s)" in p.stdout
    res = json.loads((out / "results.json").read_text())
    assert list(res["suites"]) == ["toylist"] and set(res["rows"]) == {"no_memory", "last_lesson"}
    assert all(_finite(res["summary"][r]["by_suite"]["toylist"]) for r in res["rows"]), res["summary"]


# --------------------------------------------------------------------------- a broken plugin


def test_a_broken_entry_point_is_one_import_error_naming_it(broken_site, monkeypatch):
    monkeypatch.syspath_prepend(str(broken_site))
    with pytest.raises(ImportError, match=r"^cfjax plugin entry point 'broken' \(cfjax_broken_plugin:register\) "
                                          r"failed to load: RuntimeError: this plugin is broken on purpose$"):
        load_plugins(force=True)


def test_a_registration_callable_that_raises_is_named_the_same_way(tmp_path, monkeypatch):
    site = write_dist(tmp_path, "cfjax_badcall", """
        [cfjax.plugins]
        badcall = cfjax_badcall_plugin:register
        """, {"cfjax_badcall_plugin.py": "def register():\n    raise ValueError('cannot register')\n"})
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(PluginLoadError, match=r"^cfjax plugin entry point 'badcall' \(cfjax_badcall_plugin:register\) "
                                              r"failed to load: ValueError: cannot register$"):
        load_plugins(force=True)


def test_the_cli_reports_a_broken_entry_point_in_one_line(broken_site, tmp_path):
    p = fresh(broken_site, "-m", "cfjax.cli", "countermem", "run", "--quick", "--suite", "sql",
              "--out", str(tmp_path / "out"))
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("cfjax: cfjax plugin entry point 'broken' (cfjax_broken_plugin:register) failed to "
                               "load: RuntimeError: this plugin is broken on purpose"), p.stderr
    assert not (tmp_path / "out").exists()
