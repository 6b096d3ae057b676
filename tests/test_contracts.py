"""Import contracts of the layout (shared/DESIGN.md "Layers and the one-way flow").

* kernels/ imports nothing from ``cfjax`` except ``cfjax.kernels``;
* the methods (countermem/, antipersist/, uplift/), llm/, infra/, the agent loop and the shared types never
  import ``cfjax.domains`` — they know a domain only through the Protocols in ``cfjax/types.py``;
* a method never imports another method, nor ``cfjax.experiments``;
* a domain (``cfjax/domains/**``) never imports a method; a base agent (``cfjax/agents``) imports neither a
  method nor ``cfjax.experiments``;
* ``cfjax/infra`` never imports ``cfjax.llm``;
* ``cfjax.types`` imports nothing from ``cfjax`` at all;
* the modules of ``cfjax/experiments`` have no import cycle at module level;
* no module is over ~600 lines without a reason in its docstring.

A *method* is every top-level package of ``cfjax`` that is not one of the shared layers
(:data:`LAYERS`): countermem/, antipersist/, uplift/ and each peer memory system (expel/, …) as it
arrives. The checks read the source with ``ast`` (imports inside functions count too) and also try the
import of the public packages in a fresh interpreter. Each rule has a probe test that feeds its
predicate source text with a violation, so a checker that sees nothing fails.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 650  # "about 600"
#: top-level packages of ``cfjax`` that are shared layers, not methods (memory systems)
LAYERS = ("agents", "config", "domains", "experiments", "infra", "llm", "sandbox", "kernels")


def _methods() -> list[str]:
    """Every method package: the three papers' methods, and any other top-level ``cfjax/<pkg>`` that is
    not a shared layer (each peer memory system is one folder, shared/DESIGN.md)."""
    found = {d.name for d in (ROOT / "cfjax").iterdir()
             if d.is_dir() and (d / "__init__.py").is_file() and d.name not in LAYERS}
    return sorted(found | {"countermem", "antipersist", "uplift"})


METHODS = _methods()


def _under(*prefixes: str):
    """The predicate ``module is one of prefixes or inside one of them``."""
    return lambda m: any(m == p or m.startswith(p + ".") for p in prefixes)


#: the predicates of the rules below (the probe tests feed them source with a violation)
imports_experiments = _under("cfjax.experiments")
imports_a_method = _under(*(f"cfjax.{m}" for m in METHODS), "cfjax.expel")
imports_llm = _under("cfjax.llm")


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``path`` (absolute names; relative imports resolved)."""
    return _imports_of(path.read_text(encoding="utf-8"), path.relative_to(ROOT).with_suffix("").parts)


def _imports_of(src: str, parts: tuple[str, ...]) -> list[tuple[int, str]]:
    """Imports of module source ``src`` whose dotted path is ``parts``."""
    tree = ast.parse(src)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: resolve against the file's package
                pkg = list(parts[:-node.level])
                mod = ".".join(pkg + ([mod] if mod else []))
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            out.append((node.lineno, str(node.args[0].value)))
    return out


def _files(*dirs: str) -> list[Path]:
    files = []
    for d in dirs:
        p = ROOT / d
        files += [p] if p.suffix == ".py" else sorted(p.rglob("*.py"))
    return files


def _violations(files: list[Path], bad) -> list[str]:
    return [f"{f.relative_to(ROOT)}:{line} imports {mod}" for f in files for line, mod in _imports(f) if bad(mod)]


def test_kernels_import_nothing_from_cfjax_but_kernels():
    files = _files("kernels")
    assert files
    v = _violations(files, lambda m: (m == "cfjax" or m.startswith("cfjax.")) and not m.startswith("cfjax.kernels"))
    assert not v, "kernels/ must not import the orchestration layer:\n" + "\n".join(v)


@pytest.mark.parametrize("part", ["cfjax/countermem", "cfjax/antipersist", "cfjax/uplift", "cfjax/agents", "cfjax/llm",
                                  "cfjax/infra", "cfjax/loop.py", "cfjax/types.py", "cfjax/config"])
def test_methods_llm_and_infra_know_no_domain(part):
    files = _files(part)
    assert files
    v = _violations(files, lambda m: m == "cfjax.domains" or m.startswith("cfjax.domains."))
    assert not v, f"{part} must know domains only through cfjax.types:\n" + "\n".join(v)


@pytest.mark.parametrize("method", METHODS)
def test_a_method_never_imports_another(method):
    others = [f"cfjax.{m}" for m in METHODS if m != method]
    v = _violations(_files(f"cfjax/{method}"), lambda m: any(m == o or m.startswith(o + ".") for o in others))
    assert not v, f"cfjax/{method} must not import another method:\n" + "\n".join(v)


def test_the_methods_are_found():
    assert {"countermem", "antipersist", "uplift"} <= set(METHODS)
    if (ROOT / "cfjax" / "expel").is_dir():
        assert "expel" in METHODS
    assert not set(METHODS) & set(LAYERS)


@pytest.mark.parametrize("method", METHODS)
def test_a_method_never_imports_experiments(method):
    v = _violations(_files(f"cfjax/{method}"), imports_experiments)
    assert not v, (f"cfjax/{method} must not import cfjax.experiments (move what it needs into the method or a "
                   "neutral module such as cfjax/infra):\n" + "\n".join(v))


def test_a_base_agent_imports_no_method_and_no_experiments():
    """The base agents (ReAct, Reflexion) wrap any backbone for every method: a shared layer."""
    files = _files("cfjax/agents")
    assert files
    v = _violations(files, lambda m: imports_a_method(m) or imports_experiments(m))
    assert not v, "cfjax/agents must not import a method or cfjax.experiments:\n" + "\n".join(v)


def _peer_folders() -> list[str]:
    root = ROOT / "cfjax" / "peers"
    return sorted(d.name for d in root.iterdir() if d.is_dir() and (d / "__init__.py").is_file()) if root.is_dir() else []


def imports_another_peer(peer: str):
    """The predicate ``module is another peer's package`` (``cfjax.peers.common`` is shared)."""
    others = [f"cfjax.peers.{p}" for p in _peer_folders() if p != peer]
    return _under(*others) if others else (lambda m: False)


@pytest.mark.parametrize("peer", _peer_folders())
def test_a_peer_never_imports_another_peer(peer):
    v = _violations(_files(f"cfjax/peers/{peer}"), imports_another_peer(peer))
    assert not v, f"cfjax/peers/{peer} must share only cfjax.peers.common with other peers:\n" + "\n".join(v)


def test_peer_rule_probe():
    assert imports_another_peer("__probe__")("cfjax.peers.reasoningbank.calls") or not _peer_folders()
    assert not imports_another_peer("__probe__")("cfjax.peers.common")


def test_a_domain_never_imports_a_method():
    files = _files("cfjax/domains")
    assert files
    v = _violations(files, imports_a_method)
    assert not v, "cfjax/domains must not import a method:\n" + "\n".join(v)


def test_infra_never_imports_llm():
    files = _files("cfjax/infra")
    assert files
    v = _violations(files, imports_llm)
    assert not v, "cfjax/infra must not import cfjax.llm (the shared vocabulary is in cfjax.types):\n" + "\n".join(v)


def test_types_import_nothing_from_cfjax():
    v = _violations(_files("cfjax/types.py"), lambda m: m == "cfjax" or m.startswith("cfjax."))
    assert not v, "\n".join(v)


def test_the_contract_checker_sees_a_violation():
    """The checker is not vacuous: an import inside a function, a relative import and an
    importlib call are all found."""
    src = ("def f():\n    from cfjax.domains.sql import edits\n"
           "from ..domains import sat\n"
           "import importlib\nimportlib.import_module('cfjax.domains.python')\n")
    found = {m for _, m in _imports_of(src, ("cfjax", "countermem", "probe"))}
    assert {"cfjax.domains.sql", "cfjax.domains.sat", "cfjax.domains.python"} <= found


def test_the_new_rules_see_their_violations():
    """Each predicate flags its violation in source text (in a function, relative, importlib) and
    passes its neighbours."""
    def found(src: str, parts: tuple[str, ...], bad) -> set[str]:
        return {m for _, m in _imports_of(src, parts) if bad(m)}

    # a method importing experiments
    src = ("def f():\n    from cfjax.experiments.metrics import row_metrics\n"
           "from ..experiments import stats\n"
           "import importlib\nimportlib.import_module('cfjax.experiments.upliftmem.runner')\n"
           "import cfjax.experimental_other, cfjax.infra.stats\n")
    got = found(src, ("cfjax", "countermem", "probe"), imports_experiments)
    assert {"cfjax.experiments.metrics", "cfjax.experiments.stats", "cfjax.experiments.upliftmem.runner"} <= got
    assert not {"cfjax.experimental_other", "cfjax.infra.stats"} & got
    # a domain importing a method
    src = ("from cfjax.uplift.core import Memory\n"
           "def g():\n    import cfjax.countermem.store\n"
           "from ...antipersist import guidance\n"
           "from cfjax.expel import insights\n"
           "from cfjax.domains.base import Suite\n")
    got = found(src, ("cfjax", "domains", "sql", "probe"), imports_a_method)
    assert {"cfjax.uplift.core", "cfjax.countermem.store", "cfjax.antipersist.guidance", "cfjax.expel"} <= got
    assert not any(m.startswith("cfjax.domains") for m in got)
    # infra importing llm
    src = "from cfjax.llm.base import Usage\nfrom ..llm import prompts\nfrom cfjax.types import Usage\n"
    got = found(src, ("cfjax", "infra", "probe"), imports_llm)
    assert {"cfjax.llm.base", "cfjax.llm.prompts"} <= got and "cfjax.types" not in got


# --------------------------------------------------------------------------- no import cycle in experiments


def _top_level_imports(src: str, parts: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """``(module, names)`` of the imports that run when the module is imported: the module body and
    its top-level ``if`` / ``try`` blocks (not functions, classes or ``if TYPE_CHECKING:``)."""
    out: list[tuple[str, tuple[str, ...]]] = []

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import):
                out.extend((a.name, ()) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    pkg = list(parts[:-node.level])
                    mod = ".".join(pkg + ([mod] if mod else []))
                out.append((mod, tuple(a.name for a in node.names)))
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "TYPE_CHECKING" not in test:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(ast.parse(src).body)
    return out


def _import_cycles(sources: dict[str, str], packages: set[str]) -> list[list[str]]:
    """The import cycles among ``sources`` (dotted module name → source; ``packages``: the names that
    are packages, i.e. ``__init__``), at module level. ``from P import n`` depends on ``P.n`` when that
    is a module, else on ``P``. Importing a submodule while its package's ``__init__`` is running is
    not a cycle (the package is already in ``sys.modules``), so parents are not edges."""
    graph: dict[str, set[str]] = {m: set() for m in sources}
    for m, src in sources.items():
        parts = tuple(m.split(".")) + (("__init__",) if m in packages else ())
        for mod, names in _top_level_imports(src, parts):
            subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in sources]
            for dep in subs or ([mod] if mod in sources else []):
                if dep != m or not names:
                    graph[m].add(dep)
            if subs and mod in sources and len(subs) < len(names):
                graph[m].add(mod)  # names that are not submodules come from the package itself
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return cycles


def _package_sources(rel: str) -> tuple[dict[str, str], set[str]]:
    sources, packages = {}, set()
    for f in _files(rel):
        parts = f.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
            packages.add(".".join(parts))
        sources[".".join(parts)] = f.read_text(encoding="utf-8")
    return sources, packages


def test_experiments_have_no_import_cycle():
    sources, packages = _package_sources("cfjax/experiments")
    assert "cfjax.experiments.countermem.runner" in sources
    cycles = _import_cycles(sources, packages)
    assert not cycles, "import cycles among cfjax/experiments modules (top-level imports):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_checker_sees_a_cycle():
    """Not vacuous: a three-module cycle (one import relative, one inside ``try``) is found; an import
    inside a function, under ``if TYPE_CHECKING:`` and a package importing its own submodules are not."""
    sources = {
        "cfjax.experiments.a": "from cfjax.experiments.b import x\n",
        "cfjax.experiments.b": "try:\n    from .c import y\nexcept ImportError:\n    pass\n",
        "cfjax.experiments.c": "from cfjax.experiments import a\n",
        "cfjax.experiments.d": "def f():\n    from cfjax.experiments.e import z\n",
        "cfjax.experiments.e": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                "    from cfjax.experiments.d import f\nfrom cfjax.experiments.d import f\n"),
        "cfjax.experiments.p": "from cfjax.experiments.p.q import w\n",
        "cfjax.experiments.p.q": "from cfjax.experiments.a import x\n",
    }
    cycles = _import_cycles(sources, {"cfjax.experiments", "cfjax.experiments.p"})
    assert cycles == [["cfjax.experiments.a", "cfjax.experiments.b", "cfjax.experiments.c"]], cycles


def test_no_module_is_long_without_a_reason():
    long = []
    for f in _files("cfjax", "kernels"):
        n = len(f.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            doc = ast.get_docstring(ast.parse(f.read_text(encoding="utf-8"))) or ""
            if "Length:" not in doc:
                long.append(f"{f.relative_to(ROOT)} ({n} lines)")
    assert not long, "modules over ~600 lines need a 'Length:' reason in their docstring: " + ", ".join(long)


def test_public_packages_import_in_a_fresh_interpreter():
    code = ("import cfjax, cfjax.kernels, cfjax.kernels.reference, cfjax.types, cfjax.loop, cfjax.config, "
            "cfjax.infra, cfjax.llm, cfjax.domains, cfjax.countermem, cfjax.antipersist, cfjax.uplift, "
            "cfjax.experiments.upliftmem.memsyco, cfjax.experiments; "
            "import sys; assert 'kernels' not in sys.modules, 'a top-level kernels module was imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
