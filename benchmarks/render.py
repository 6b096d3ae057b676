"""Regenerate the tables of ``benchmarks/RESULTS.md`` from the JSON of the runs that produced them.

Every block ``<!-- table:<name>/<id> -->`` … ``<!-- /table -->`` in RESULTS.md is replaced by table
``<id>`` of ``benchmarks/results/<name>.json`` (``meta`` + ``tables``, see :mod:`benchmarks._meta`),
followed by a provenance line: the source JSON, the inputs' sha256 prefix, the machine's load before the
run (1-minute load average and share of the cores busy), the thread settings, the date and the command.
A run taken on a loaded machine is marked "under load" there. Prose outside the blocks is left alone.

``--check`` changes nothing and exits 1 when

* a JSON is **stale**: the sha256 of its recorded sources and arguments, recomputed from the files as
  they are now, differs from the hash stored at run time (or a source is gone); or
* a block was **hand-edited**: its text differs from what the JSON renders; or
* a block names a table its JSON does not have.

A result JSON that cannot be read (not JSON, or not ``meta`` + ``tables``) is named and its blocks are left
as they are; the others are still rendered, and the exit status is 2.

A block whose JSON does not exist yet is skipped with a warning (not an error), so a section can be
placed before its benchmark has run.

Usage::

    python benchmarks/render.py            # rewrite RESULTS.md (atomically)
    python benchmarks/render.py --check    # verify, print what is stale or edited
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._meta import RESULTS_DIR, ROOT, inputs_hash  # noqa: E402

RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"
BLOCK = re.compile(r"<!-- table:(?P<name>[\w.-]+)/(?P<id>[\w.-]+) -->\n(?P<body>.*?)<!-- /table -->", re.DOTALL)
# a run is flagged "under load" when, before it started, other work kept this share of the cores busy
# (sampled over 1 s; without that sample: when the 1-minute load average was above this share of the
# cores — it lags, so a run right after another one would be flagged falsely) — or when, at its end, the
# load average less the run's own cores was
LOADED_BUSY_SHARE = 0.25
LOADED_LOADAVG_PER_CORE = 0.5


@dataclass
class Report:
    """What a render or check found."""

    missing_json: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    unknown_table: list[str] = field(default_factory=list)
    bad_json: list[str] = field(default_factory=list)
    unplaced: list[str] = field(default_factory=list)
    rendered: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.stale or self.edited or self.unknown_table or self.bad_json)


def load_result(path: Path) -> dict[str, Any]:
    """A results JSON, checked for the ``meta`` + ``tables`` layout."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or "meta" not in data or "tables" not in data:
        raise ValueError(f"{path}: a benchmark result needs 'meta' and 'tables' (written by _meta.write_result)")
    for t in data["tables"]:
        for k in ("id", "title", "columns", "rows"):
            if k not in t:
                raise ValueError(f"{path}: table {t.get('id', '?')!r} has no {k!r}")
    return data


def stale_reason(meta: dict[str, Any]) -> str | None:
    """Why the result no longer matches the current sources, or ``None`` when it does."""
    sources, args = meta.get("sources"), meta.get("args")
    if sources is None:
        return "meta records no 'sources' to recompute the inputs hash from"
    gone = [s for s in sources if not (ROOT / s).exists()]
    if gone:
        return f"source(s) no longer exist: {', '.join(gone)}"
    now = inputs_hash(sources, args)
    if now != meta.get("inputs_sha256"):
        return f"inputs hash {str(meta.get('inputs_sha256'))[:12]} at run time, {now[:12]} now"
    return None


def _esc(cell: Any) -> str:
    return str(cell).replace("|", "\\|").replace("\n", " ")


def provenance(name: str, meta: dict[str, Any], results_dir: Path) -> str:
    """One line: source JSON, inputs hash, load before the run, threads, date, command."""
    try:
        src = (results_dir / f"{name}.json").resolve().relative_to(ROOT)
    except ValueError:
        src = Path(results_dir.name) / f"{name}.json"
    lb = meta.get("load_before") or {}
    cores = lb.get("cores") or 1
    load = f"loadavg {lb.get('loadavg_1m', '?')}"
    if "busy_share" in lb:
        load += f", {100 * lb['busy_share']:.0f} % of {cores} cores busy"
    la = (meta.get("load_after") or {}).get("loadavg_1m")
    if la is not None:
        load += f" (loadavg {la} after)"
    th = meta.get("threads") or {}
    own = th.get("cores", 1) if isinstance(th.get("cores", 1), int) else 1
    before = (lb["busy_share"] >= LOADED_BUSY_SHARE if "busy_share" in lb
              else lb.get("loadavg_1m", 0.0) > LOADED_LOADAVG_PER_CORE * cores)
    loaded = before or (la is not None and la - own > LOADED_LOADAVG_PER_CORE * cores)
    threads = th.get("summary") or ", ".join(f"{k}={v}" for k, v in th.items() if isinstance(v, (str, int)))
    probe = (th.get("xla_probe") or {}).get("cpu_over_wall")
    if probe is not None:
        threads += f"; XLA probe CPU/wall {probe}"
    parts = [f"source `{src}`", f"inputs sha256 `{str(meta.get('inputs_sha256', '?'))[:12]}`",
             f"load before the run: {load}" + (" — **under load**" if loaded else ""),
             f"threads: {threads or 'not recorded'}", f"{meta.get('date_utc', '?')} UTC",
             f"`{meta.get('command', '?')}`"]
    return "<sub>" + " · ".join(parts) + "</sub>"


def render_table(name: str, tab: dict[str, Any], meta: dict[str, Any], results_dir: Path) -> str:
    """The Markdown of one block body (between the markers)."""
    lines = []
    if tab.get("title"):
        lines += [f"*{tab['title']}*", ""]
    lines.append("| " + " | ".join(_esc(c) for c in tab["columns"]) + " |")
    lines.append("|" + "---|" * len(tab["columns"]))
    for row in tab["rows"]:
        lines.append("| " + " | ".join(_esc(c) for c in row) + " |")
    if tab.get("note"):
        lines += ["", tab["note"].strip()]
    lines += ["", provenance(name, meta, results_dir)]
    return "\n".join(lines) + "\n"


def process(md_path: Path = RESULTS_MD, results_dir: Path = RESULTS_DIR, *, check: bool = False,
            out=None) -> Report:
    """Render (or, with ``check``, verify) every block of ``md_path``; returns what was found. Messages go
    to ``out`` (default: standard output)."""
    out = sys.stdout if out is None else out
    text = md_path.read_text()
    rep = Report()
    cache: dict[str, dict[str, Any] | None] = {}
    placed: set[tuple[str, str]] = set()

    def result(name: str) -> dict[str, Any] | None:
        if name not in cache:
            p = results_dir / f"{name}.json"
            try:
                cache[name] = load_result(p) if p.exists() else None
            except ValueError as e:  # one broken result must not stop the others from rendering
                cache[name] = None
                rep.bad_json.append(name)
                print(f"ERROR: {e}; its blocks are left as they are", file=out)
                return None
            if cache[name] is None:
                rep.missing_json.append(name)
                print(f"warning: {p} does not exist; its blocks are left as they are", file=out)
            else:
                why = stale_reason(cache[name]["meta"])
                if why:
                    rep.stale.append(name)
                    print(f"STALE: {p.name}: {why}", file=out)
        return cache[name]

    def replace(m: re.Match) -> str:
        name, tid, body = m["name"], m["id"], m["body"]
        res = result(name)
        if res is None:
            return m[0]
        placed.add((name, tid))
        tab = next((t for t in res["tables"] if t["id"] == tid), None)
        if tab is None:
            rep.unknown_table.append(f"{name}/{tid}")
            have = ", ".join(t["id"] for t in res["tables"])
            print(f"ERROR: block table:{name}/{tid}: {name}.json has no table {tid!r} (it has: {have})", file=out)
            return m[0]
        new = render_table(name, tab, res["meta"], results_dir)
        if body != new:
            rep.edited.append(f"{name}/{tid}")
            if check:
                print(f"EDITED: block table:{name}/{tid} differs from what {name}.json renders", file=out)
        rep.rendered += 1
        return f"<!-- table:{name}/{tid} -->\n{new}<!-- /table -->"

    new_text = BLOCK.sub(replace, text)
    for name, res in cache.items():
        for t in (res or {}).get("tables", []):
            if (name, t["id"]) not in placed:
                rep.unplaced.append(f"{name}/{t['id']}")
                print(f"note: table {name}/{t['id']} has no block in {md_path.name}", file=out)
    if check:
        return rep
    if new_text != text:
        fd, tmp = tempfile.mkstemp(dir=md_path.parent, prefix=f".{md_path.name}.")
        with os.fdopen(fd, "w") as f:
            f.write(new_text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, md_path)
    rep.edited = []  # rewritten: no longer differs
    print(f"rendered {rep.rendered} table(s) into {md_path}", file=out)
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale or edited")
    p.add_argument("--md", type=Path, default=RESULTS_MD, help="the Markdown file with the blocks")
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of the <name>.json results")
    a = p.parse_args(argv)
    if not a.md.exists():
        p.error(f"{a.md} does not exist")
    rep = process(a.md, a.results, check=a.check)
    if rep.bad_json:
        print("unreadable result(s): " + ", ".join(rep.bad_json))
        return 2
    if a.check:
        if rep.failed:
            print(f"check failed: {len(rep.stale)} stale result(s), {len(rep.edited)} edited block(s), "
                  f"{len(rep.unknown_table)} unknown table(s)")
            return 1
        print(f"check passed: {rep.rendered} table(s) match their JSON"
              + (f"; {len(rep.missing_json)} result(s) not run yet" if rep.missing_json else ""))
        return 0
    if rep.stale:
        print("warning: rendered stale result(s): " + ", ".join(rep.stale) + " (rerun them)")
    return 1 if rep.unknown_table else 0


if __name__ == "__main__":
    sys.exit(main())
