"""The public API (README.md, "Python API"): every package re-exports its public names in ``__all__``,
every such name resolves, the notebooks import only those names, and ``import cfjax`` stays cheap."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import cfjax

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: packages installed from outside cfjax/ (setup.py: kernels/ ships as cfjax.kernels)
EXTRA_PACKAGES = ("cfjax.kernels", "cfjax.kernels.reference")


def _packages() -> list[str]:
    found = [m.name for m in pkgutil.walk_packages(cfjax.__path__, "cfjax.") if m.ispkg]
    return sorted({"cfjax", *found, *EXTRA_PACKAGES})


PACKAGES = _packages()


def test_the_packages_are_found():
    for p in ("cfjax.countermem", "cfjax.antipersist", "cfjax.uplift", "cfjax.llm", "cfjax.domains",
              "cfjax.experiments", "cfjax.config", "cfjax.infra", "cfjax.kernels", "cfjax.expel"):
        assert p in PACKAGES


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_exports_names_that_resolve(name):
    pkg = importlib.import_module(name)
    names = getattr(pkg, "__all__", None)
    assert isinstance(names, (list, tuple)) and names, f"{name} has no __all__"
    assert len(names) == len(set(names)), f"{name}.__all__ lists a name twice"
    missing = [n for n in names if not hasattr(pkg, n)]
    assert not missing, f"{name}.__all__ names what the package does not have: {missing}"
    assert set(names) <= set(dir(pkg)), f"dir({name}) does not list every public name"


def _cfjax_imports(nb_path: Path) -> list[tuple[int, ast.stmt]]:
    nb = nbformat.read(nb_path, as_version=4)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        src = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in cell.source.splitlines())
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "cfjax":
                out.append((i, node))
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "cfjax" for a in node.names):
                out.append((i, node))
    return out


def test_the_notebooks_are_found():
    assert {p.name for p in NOTEBOOKS} >= {"countermem.ipynb", "antipersistence.ipynb", "upliftmem.ipynb",
                                           "compare.ipynb"}


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_import_only_public_names(nb_path):
    imports = _cfjax_imports(nb_path)
    assert imports, f"{nb_path.name} imports nothing from cfjax"
    bad = []
    for cell, node in imports:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "cfjax" and not hasattr(importlib.import_module(a.name), "__path__"):
                    bad.append(f"cell {cell}: import {a.name} (a module, not a package)")
            continue
        mod = importlib.import_module(node.module)
        if not hasattr(mod, "__path__"):
            bad.append(f"cell {cell}: from {node.module} import … (a module, not a package)")
            continue
        public = set(getattr(mod, "__all__", ()))
        bad += [f"cell {cell}: {a.name} is not in {node.module}.__all__" for a in node.names if a.name not in public]
    assert not bad, f"{nb_path.name} imports non-public names:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", ["cfjax", "cfjax.countermem", "cfjax.llm", "cfjax.infra", "cfjax.experiments"])
def test_importing_the_package_imports_no_jax(name):
    code = (f"import sys, {name} as p\n"
            "heavy = sorted(m for m in ('jax', 'faiss', 'orbax', 'torch', 'numpy') if m in sys.modules)\n"
            "print(','.join(heavy))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    heavy = set(filter(None, res.stdout.strip().split(",")))
    allowed = {"numpy"} if name != "cfjax" else set()
    assert heavy <= allowed, f"import {name} imported {sorted(heavy)}"


def test_top_level_vocabulary():
    from cfjax import (CALLS, DOMAINS, MEMORY_SYSTEMS, Attempt, Backbone, CallKind, DomainInfo, EditModel,
                       MemorySystem, MemorySystemInfo, MemoryText, Outcome, Task, Usage, World)
    from cfjax import types
    from cfjax.memory import MemorySystem as MS

    assert Task is types.Task and World is types.World and MemorySystem is MS
    assert {Attempt, Backbone, CallKind, DomainInfo, EditModel, MemoryText, Outcome, Usage, MemorySystemInfo}
    assert "sql" in DOMAINS and "expel" in MEMORY_SYSTEMS and "DRAFT_ACTION" in CALLS


def test_lazy_exports_refuse_a_name_twice_and_unknown_names():
    from cfjax.infra._lazy import lazy_exports

    with pytest.raises(ValueError, match="twice"):
        lazy_exports("cfjax", {".a": ["x"], ".b": ["y as x"]})
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cfjax.nope  # noqa: B018
