"""Execute the walkthrough notebooks in ``notebooks/`` in place, so they are committed with outputs.

Usage (from the repository root)::

    python -m cfjax.experiments.notebooks                 # every notebooks/*.ipynb
    python -m cfjax.experiments.notebooks countermem      # by name (the file's stem) ...
    python -m cfjax.experiments.notebooks notebooks/antipersistence.ipynb   # ... or by path

Each notebook runs top to bottom in a fresh ``python3`` kernel (nbclient) whose working directory
is a temporary directory, so nothing it writes lands in the repository; a cell may run for at most
:data:`CELL_TIMEOUT_S` seconds. Volatile metadata (nbclient's per-cell execution timestamps, any
``ExecuteTime`` of the classic extension, the kernel's transient display ids) is dropped, so a re-run
with unchanged code changes only what the computation itself changed. The result is validated and
written atomically (:func:`cfjax.infra.io.atomic_write_text`); a notebook whose execution fails is
left untouched and the command exits with status 1 after trying the others.

Every ``*.ipynb`` directly in ``notebooks/`` is picked up (new notebooks need no registration).
:func:`execute_notebook` runs one notebook and returns it without writing anything (the tests use it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["NOTEBOOK_DIR", "CELL_TIMEOUT_S", "KERNEL", "available", "resolve", "execute_notebook", "strip_volatile",
           "summarize", "main"]

#: the repository's notebooks
NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
#: longest a single cell may run (seconds)
CELL_TIMEOUT_S = 900
#: the Jupyter kernel every notebook runs in
KERNEL = "python3"

_VOLATILE_CELL_KEYS = ("execution", "ExecuteTime", "collapsed", "scrolled")


def available(directory: str | Path = NOTEBOOK_DIR) -> dict[str, Path]:
    """Every notebook in ``directory`` (not recursive), by name (file stem), sorted."""
    d = Path(directory)
    return {p.stem: p for p in sorted(d.glob("*.ipynb")) if p.is_file() and not p.name.startswith(".")}


def resolve(names: Sequence[str], directory: str | Path = NOTEBOOK_DIR) -> list[Path]:
    """The notebooks ``names`` ask for (all of them when empty), in the order given, without repeats.

    A name is a file stem (``countermem``), a file name (``countermem.ipynb``) or a path to an
    existing ``.ipynb`` file.

    Raises:
        ValueError: an unknown name (the message lists the available notebooks).
    """
    found = available(directory)
    if not names:
        return list(found.values())
    out: list[Path] = []
    for n in names:
        p = Path(n)
        stem = p.name[: -len(".ipynb")] if p.name.endswith(".ipynb") else p.name
        if p.suffix == ".ipynb" and p.is_file():
            path = p.resolve()
        elif stem in found and (len(p.parts) == 1 or p.resolve().parent == Path(directory).resolve()):
            path = found[stem]
        else:
            raise ValueError(f"unknown notebook {n!r} (available in {directory}: {', '.join(found) or 'none'})")
        if path not in out:
            out.append(path)
    return out


def strip_volatile(nb) -> None:
    """Drop the metadata that changes on every run (in place): per-cell execution timestamps and
    similar UI state, and transient display ids of outputs."""
    for cell in nb.cells:
        for k in _VOLATILE_CELL_KEYS:
            cell.metadata.pop(k, None)
        for out in cell.get("outputs", []):
            out.pop("transient", None)
    nb.metadata.pop("widgets", None)


def execute_notebook(path: str | Path, *, workdir: str | Path, timeout: int = CELL_TIMEOUT_S,
                     kernel_name: str = KERNEL):
    """Run the notebook at ``path`` top to bottom in a fresh kernel whose working directory is
    ``workdir``; return the executed :class:`nbformat.NotebookNode` (volatile metadata stripped).
    Nothing is written.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised (the message shows the traceback).
        nbclient.exceptions.CellTimeoutError: a cell ran longer than ``timeout`` seconds.
    """
    import nbclient
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, record_timing=False,
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()
    strip_volatile(nb)
    nbformat.validate(nb)
    return nb


def summarize(nb) -> dict:
    """Counts of an executed notebook: cells, code cells, outputs, PNG images and error outputs."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    outs = [o for c in code for o in c.get("outputs", [])]
    return {"cells": len(nb.cells), "code_cells": len(code), "outputs": len(outs),
            "pngs": sum("image/png" in o.get("data", {}) for o in outs),
            "errors": sum(o.get("output_type") == "error" for o in outs)}


def _run_one(path: Path, timeout: int) -> bool:
    import nbformat

    from cfjax.infra.io import atomic_write_text

    t0 = time.perf_counter()
    print(f"executing {path} (kernel {KERNEL}, cell timeout {timeout}s) ...", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix=f"cfjax-nb-{path.stem}-") as work:
            nb = execute_notebook(path, workdir=work, timeout=timeout)
    except Exception as e:  # a failing cell: report it, leave the file as it was
        print(f"FAILED {path} after {time.perf_counter() - t0:.0f}s — file left unchanged:\n{e}", file=sys.stderr)
        return False
    text = nbformat.writes(nb)
    if not text.endswith("\n"):
        text += "\n"
    atomic_write_text(path, text)
    s = summarize(nb)
    print(f"wrote {path}: {s['cells']} cells ({s['code_cells']} code), {s['outputs']} outputs, {s['pngs']} PNG(s), "
          f"{s['errors']} error output(s), {len(text) / 1024:.0f} KiB, {time.perf_counter() - t0:.0f}s", flush=True)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cfjax.experiments.notebooks [names...]``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m cfjax.experiments.notebooks",
        description="Execute notebooks/*.ipynb in place (outputs committed; volatile metadata stripped).")
    parser.add_argument("names", nargs="*", help="notebook names (file stems) or paths; default: every notebook in "
                                                 f"{NOTEBOOK_DIR}")
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT_S, help="seconds one cell may run "
                        f"(default {CELL_TIMEOUT_S})")
    parser.add_argument("--list", action="store_true", help="list the notebooks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, p in available().items():
            print(f"{name:<20}{p}")
        return 0
    try:
        paths = resolve(args.names)
    except ValueError as e:
        parser.error(str(e))
    if not paths:
        parser.error(f"no notebooks in {NOTEBOOK_DIR}")
    ok = [_run_one(p, args.timeout) for p in paths]
    print(f"{sum(ok)}/{len(ok)} notebook(s) executed" + ("" if all(ok) else "; failures left unchanged"))
    return 0 if all(ok) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
