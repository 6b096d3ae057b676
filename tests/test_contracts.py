"""Import contracts of the layout (shared/DESIGN.md "Layers and the one-way flow").

* kernels/ imports nothing from ``cfjax`` except ``cfjax.kernels``;
* the methods (countermem/, antipersist/, uplift/), llm/, infra/, the agent loop and the shared types never
  import ``cfjax.domains`` — they know a domain only through the Protocols in ``cfjax/types.py``;
* a method never imports another method;
* ``cfjax.types`` imports nothing from ``cfjax`` at all;
* no module is over ~600 lines without a reason in its docstring.

The checks read the source with ``ast`` (imports inside functions count too) and also try the
import of the public packages in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 650  # "about 600"


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


@pytest.mark.parametrize("part", ["cfjax/countermem", "cfjax/antipersist", "cfjax/uplift", "cfjax/llm",
                                  "cfjax/infra", "cfjax/loop.py", "cfjax/types.py", "cfjax/config"])
def test_methods_llm_and_infra_know_no_domain(part):
    files = _files(part)
    assert files
    v = _violations(files, lambda m: m == "cfjax.domains" or m.startswith("cfjax.domains."))
    assert not v, f"{part} must know domains only through cfjax.types:\n" + "\n".join(v)


@pytest.mark.parametrize("method", ["countermem", "antipersist", "uplift"])
def test_a_method_never_imports_another(method):
    others = [f"cfjax.{m}" for m in ("countermem", "antipersist", "uplift") if m != method]
    v = _violations(_files(f"cfjax/{method}"), lambda m: any(m == o or m.startswith(o + ".") for o in others))
    assert not v, f"cfjax/{method} must not import another method:\n" + "\n".join(v)


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
            "cfjax.domains.memsyco, cfjax.experiments; "
            "import sys; assert 'kernels' not in sys.modules, 'a top-level kernels module was imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
