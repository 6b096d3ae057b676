"""``cfjax sweep``: a pre-registered sensitivity sweep over the scripted simulator's competence.

Every figure cfjax prints with the scripted backbone depends on competence
parameters nobody measured (:class:`~cfjax.config.scripted.ScriptedConfig`).
The sweep reruns a method's rows over a grid of them and reports, at every
grid point, each row's gain over the memory-free row with its paired
task-bootstrap 95% interval (:mod:`cfjax.experiments.stats`), as a table
and a heatmap, plus a verdict per row: at how many points the interval lies
above zero, contains zero, or lies below it. That says where a paper's
direction holds *in this simulator* and where it does not.

The grid is a TOML file. The default one (``sweep_grid.toml`` beside this
module) was committed before its first run and is not edited after results
are seen (pre-registration)::

    [countermem]
    suites = ["sql", "pybugs", "sat"]
    rows = ["none", "best_of_n", "expel", "cf_memory", "cf_without_wm", "wm_without_cf"]
    reference = "none"
    [countermem.base]                 # config overrides at every point (dotted keys)
    seeds = [0]
    split_seeds = [12345, 1]
    [countermem.axes]                 # the grid: the cartesian product of these
    "scripted.p_propose_fix" = [0.25, 0.5, 0.75]
    "scripted.p_error" = [0.3, 0.5, 0.7]
    [countermem.quick]                # --quick: overrides and a task cap
    max_tasks = 12
    ...

Keys are dotted paths into the method's config (``scripted.p_error``,
``dqn.total_decisions``, ``split_seeds``); a wrong key or type is refused
with the key named (:func:`cfjax.config.set_keys`, the TOML loader's checks).
``cfjax sweep --set KEY=VALUE`` adds to the base at every point, after the
grid file's ``base`` and ``quick`` tables (it may not set an axis).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cfjax.config import ConfigError, apply_overrides, parse_override, set_keys, to_dict
from cfjax.experiments.common import finite
from cfjax.experiments.stats import fmt_interval
from cfjax.infra.executors import Executor, is_local, resolve_executor

__all__ = ["DEFAULT_GRID", "SweepSpec", "load_grid", "override", "with_sets", "run_sweep", "sweep_outputs",
           "format_sweep", "draw_sweep"]

#: the pre-registered default grid (committed before its first run)
DEFAULT_GRID = Path(__file__).with_name("sweep_grid.toml")
METHODS = ("countermem", "antipersist")


@dataclass(frozen=True)
class SweepSpec:
    """One method's section of a grid file."""

    method: str
    suites: tuple[str, ...]
    rows: tuple[str, ...]
    reference: str
    base: dict
    axes: dict[str, tuple]
    max_tasks: int | None = None

    def points(self) -> list[dict[str, Any]]:
        """The cartesian product of the axes, first axis slowest."""
        names = list(self.axes)
        return [dict(zip(names, vals)) for vals in itertools.product(*(self.axes[n] for n in names))]


def load_grid(path: str | Path, method: str, *, quick: bool = False) -> SweepSpec:
    """Read ``method``'s section of a grid file (``--quick`` applies its ``quick`` table)."""
    if method not in METHODS:
        raise ConfigError(f"unknown sweep method {method!r} (choose from {', '.join(METHODS)})")
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"grid file {p} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"grid path {p} is a directory, not a TOML file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"grid file {p} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"cannot read grid file {p}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"grid file {p} is not valid TOML: {' '.join(str(e).split())}") from None
    if method not in data:
        raise ConfigError(f"grid file {p} has no [{method}] section (has: {', '.join(data) or 'none'})")

    def table(v: Any, where: str) -> dict:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ConfigError(f"grid file {p}: {where} must be a table, got {type(v).__name__}")
        return dict(v)

    def strings(v: Any, where: str) -> tuple[str, ...]:
        if v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"grid file {p}: {where} must be a list of strings, got {v!r:.60}")
        return tuple(v)

    sec = table(data[method], f"[{method}]")
    unknown = set(sec) - {"suites", "rows", "reference", "base", "axes", "quick"}
    if unknown:
        raise ConfigError(f"grid file {p}: unknown key(s) in [{method}]: {sorted(unknown)}")
    axes = table(sec.get("axes"), f"[{method}.axes]")
    if not axes or any(not isinstance(v, list) or not v for v in axes.values()):
        raise ConfigError(f"grid file {p}: [{method}.axes] must map each parameter to a non-empty list")
    base = table(sec.get("base"), f"[{method}.base]")
    max_tasks = None
    if quick:
        q = table(sec.get("quick"), f"[{method}.quick]")
        max_tasks = q.pop("max_tasks", None)
        if max_tasks is not None and (not isinstance(max_tasks, int) or isinstance(max_tasks, bool)
                                      or max_tasks < 1):
            raise ConfigError(f"grid file {p}: [{method}.quick] max_tasks must be an int >= 1, got {max_tasks!r}")
        q_axes = table(q.pop("axes", None), f"[{method}.quick.axes]")
        if any(not isinstance(v, list) or not v for v in q_axes.values()):
            raise ConfigError(f"grid file {p}: [{method}.quick.axes] must map each parameter to a non-empty list")
        axes = {**axes, **q_axes}
        base.update(q)
    rows = strings(sec.get("rows"), f"[{method}] rows")
    strings(sec.get("suites"), f"[{method}] suites")
    reference = sec.get("reference", "none" if method == "countermem" else "no_memory")
    if not isinstance(reference, str):
        raise ConfigError(f"grid file {p}: [{method}] reference must be a string, got {reference!r:.60}")
    if rows and reference not in rows:
        raise ConfigError(f"grid file {p}: the reference row {reference!r} must be among rows {list(rows)}")
    return SweepSpec(method, tuple(sec.get("suites") or ("all",)), rows, reference, base,
                     {k: tuple(v) for k, v in axes.items()}, max_tasks)


def override(cfg: Any, changes: dict[str, Any]) -> Any:
    """``cfg`` with dotted-key ``changes`` applied, validated like a TOML config (a wrong key or type
    raises :class:`~cfjax.config.ConfigError` naming it): :func:`cfjax.config.set_keys`, the same
    path as ``--set``."""
    return set_keys(cfg, changes, label="sweep key")


def _point_label(point: dict) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in point.items())


# --------------------------------------------------------------------------- runners


def _run_countermem(spec: SweepSpec, points: list[dict], out: Path, workers: int | None,
                    log: Callable[[str], None], executor: Executor = "local") -> list[dict]:
    """Every (point, suite, split, seed) unit on one process pool (or as Ray tasks); one summary per point."""
    import os

    from cfjax.config import CounterMemConfig
    from cfjax.domains import build_suite
    from cfjax.experiments.backbones import BackboneSpec
    from cfjax.experiments.common import resolve_suites
    from cfjax.experiments.countermem.runner import expand_rows, make_jobs, run_jobs
    from cfjax.experiments.countermem.report import aggregate, collect_outcomes

    names = resolve_suites(list(spec.suites) if spec.suites != ("all",) else "all")
    rows = expand_rows(spec.rows or ["all"])
    roots = {n: out / "suites" / n for n in names}
    for n, r in roots.items():
        build_suite(n, r)
    cfgs = [override(override(CounterMemConfig(), spec.base), p) for p in points]
    jobs, owner = [], []
    for i, cfg in enumerate(cfgs):
        js = make_jobs(cfg, roots, rows=rows, backbone=BackboneSpec("scripted"), max_tasks=spec.max_tasks)
        jobs += js
        owner += [i] * len(js)
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    where = f"workers {workers}" if is_local(executor) else "Ray tasks"
    log(f"cfjax sweep countermem: {len(points)} points × {len(jobs) // len(points)} units = {len(jobs)} units, "
        f"rows {list(rows)}, {where}")
    units = run_jobs(jobs, workers=workers, executor=executor)
    results = []
    for i, (p, cfg) in enumerate(zip(points, cfgs)):
        us = [u for u, o in zip(units, owner) if o == i]
        outcomes = collect_outcomes(us)
        summary = aggregate(us, outcomes)
        results.append({"point": p, "summary": summary, "outcomes": outcomes, "config": to_dict(cfg)})
    return results


def _run_antipersist(spec: SweepSpec, points: list[dict], out: Path, workers: int | None,
                     log: Callable[[str], None], executor: Executor = "local") -> list[dict]:
    """One Anti-Persistence run per point (each parallel over its own jobs)."""
    from cfjax.config import APConfig
    from cfjax.experiments.antipersist.runner import run_main
    from cfjax.experiments.common import resolve_suites
    from cfjax.experiments.countermem.report import interval, outcome_clusters

    names = resolve_suites(list(spec.suites) if spec.suites != ("all",) else "all")
    results = []
    for i, p in enumerate(points):
        cfg = override(override(APConfig(), spec.base), p)
        if spec.max_tasks:
            cfg = dataclasses.replace(cfg, max_eval_tasks=spec.max_tasks)
        log(f"cfjax sweep antipersist: point {i + 1}/{len(points)} ({_point_label(p)})")
        payload = run_main(cfg, suites=names, rows=list(spec.rows) or None, out=out / f"point_{i:02d}",
                           workers=workers, quick=False, log=lambda s: None, executor=executor)
        outcomes = payload["outcomes"]
        rows = list(spec.rows) or sorted({r for s in outcomes.values() for b in s.values() for r in b["rows"]})
        table: dict = {}
        table_mean: dict = {}
        for r in rows:
            table[r] = {s: {"ci": interval(outcome_clusters(outcomes, [s]), r),
                            f"vs_{spec.reference}": interval(outcome_clusters(outcomes, [s]), r, spec.reference)}
                        for s in names}
            table_mean[r] = {"ci": interval(outcome_clusters(outcomes, names), r),
                             f"vs_{spec.reference}": interval(outcome_clusters(outcomes, names), r, spec.reference)}
        results.append({"point": p, "summary": {"suites": names, "rows": rows, "table": table,
                                                 "table_mean": table_mean},
                        "outcomes": outcomes, "config": to_dict(cfg)})
    return results


def sweep_outputs() -> list[str]:
    """What ``cfjax sweep --force`` removes from its ``--out`` directory (globs relative to it):
    ``sweep.json``, ``sweep.txt``, the heatmaps, the built suites and the per-point run directories
    (``point_<i>/``, Anti-Persistence); other files are kept."""
    from cfjax.domains import SUITES

    return ["sweep.json", "sweep.txt", "sweep_*.png", "point_[0-9][0-9]*"] + [f"suites/{n}" for n in SUITES]


def _check_spec(spec: SweepSpec, grid: str | Path) -> None:
    """The grid's suites and rows exist and every point's config is valid (before the output
    directory is touched)."""
    from cfjax.config import APConfig, CounterMemConfig
    from cfjax.experiments.common import resolve_suites

    base = CounterMemConfig() if spec.method == "countermem" else APConfig()
    for p in spec.points():
        override(override(base, spec.base), p)

    resolve_suites(list(spec.suites) if spec.suites != ("all",) else "all")
    if spec.method == "countermem":
        from cfjax.experiments.countermem.rows import row_names

        ROWS = row_names()
    else:
        from cfjax.antipersist.protocol import ROWS
    bad = [r for r in spec.rows if r not in ROWS and not (r == "all" and spec.method == "countermem")]
    if bad:
        raise ConfigError(f"grid file {grid}: unknown row(s) {bad} for {spec.method} (choose from {', '.join(ROWS)})")


def with_sets(spec: SweepSpec, sets: Sequence[str]) -> SweepSpec:
    """``spec`` with ``--set KEY=VALUE`` overrides added to its ``base`` (after the grid file's
    ``base`` and ``quick`` tables, before each point's axes). Checked here, each error naming its
    ``--set``; a key the grid varies (an axis) is refused."""
    if not sets:
        return spec
    from cfjax.config import APConfig, CounterMemConfig

    parsed = [parse_override(t) for t in sets]
    for text, (key, _) in zip(sets, parsed):
        if key in spec.axes:
            raise ConfigError(f"--set {text}: {key!r} is an axis of the grid (the sweep varies it); "
                              "change it in the grid file instead")
    cls = CounterMemConfig if spec.method == "countermem" else APConfig
    apply_overrides(override(cls(), spec.base), sets)
    return dataclasses.replace(spec, base={**spec.base, **dict(parsed)})


def run_sweep(method: str, *, grid: str | Path = DEFAULT_GRID, out: str | Path, quick: bool = False,
              workers: int | None = None, log: Callable[[str], None] = print, existing: str = "refuse",
              executor: Executor = "local", sets: Sequence[str] = ()) -> dict:
    """``cfjax sweep``: run ``method``'s grid, write ``sweep.json``, ``sweep.txt`` and the heatmaps.

    ``sets``: ``--set KEY=VALUE`` overrides of the method's config at every point
    (:func:`with_sets`); each point's config in ``sweep.json`` includes them.

    ``existing`` says what to do when ``out`` is a non-empty directory (checked after the grid,
    before anything is written): ``"refuse"`` (default) raises
    :class:`cfjax.infra.io.OutputExistsError`; ``"force"`` first removes what a sweep writes there
    (:func:`sweep_outputs`), keeping other files; ``"resume"`` is refused (points are not saved
    separately).

    ``executor``: ``"local"`` (``workers`` processes) or ``"ray"`` / a
    :class:`cfjax.infra.executors.RayExecutor` (every unit a Ray task; the results are the same)."""
    from cfjax.infra.io import atomic_write_text, prepare_output_dir

    executor = resolve_executor(executor)
    spec = with_sets(load_grid(grid, method, quick=quick), sets)
    _check_spec(spec, grid)
    points = spec.points()
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=sweep_outputs(), resumable=False, command="cfjax sweep")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    run = _run_countermem if method == "countermem" else _run_antipersist
    results = run(spec, points, out, workers, log, executor)
    payload = {"method": method, "grid": str(grid), "grid_text": Path(grid).read_text(), "quick": quick,
               "set": list(sets), "axes": {k: list(v) for k, v in spec.axes.items()}, "reference": spec.reference,
               "backbone": "scripted backbone (seeded simulator, not an LLM)",
               "seconds": round(time.perf_counter() - t0, 1), "points": results}
    payload["verdicts"] = verdicts(payload)
    atomic_write_text(out / "sweep.json", json.dumps(finite(payload), indent=1) + "\n")
    text = format_sweep(payload)
    atomic_write_text(out / "sweep.txt", text + "\n")
    log(text)
    for path in draw_sweep(payload, out):
        log(f"wrote {path}")
    log(f"wrote {out / 'sweep.json'}, {out / 'sweep.txt'} ({payload['seconds']:.0f}s)")
    return payload


# --------------------------------------------------------------------------- verdicts and output


def _gain(point: dict, row: str, ref: str, suite: str | None = None) -> dict | None:
    S = point["summary"]
    m = S["table_mean"].get(row, {}) if suite is None else S["table"].get(row, {}).get(suite, {})
    return m.get(f"vs_{ref}")


def verdicts(payload: dict) -> dict:
    """Per row (and suite, and ``mean``): at how many grid points the gain's interval lies above 0,
    contains 0, or lies below it."""
    ref = payload["reference"]
    pts = payload["points"]
    if not pts:
        return {}
    S0 = pts[0]["summary"]
    out: dict = {}
    for r in S0["rows"]:
        if r == ref:
            continue
        out[r] = {}
        for s in list(S0["suites"]) + ["mean"]:
            c = {"above": 0, "contains": 0, "below": 0}
            for p in pts:
                iv = _gain(p, r, ref, None if s == "mean" else s)
                if iv is None:
                    continue
                c["above" if iv["lo"] > 0 else "below" if iv["hi"] < 0 else "contains"] += 1
            out[r][s] = c
    return out


def format_sweep(payload: dict) -> str:
    ref = payload["reference"]
    pts = payload["points"]
    S0 = pts[0]["summary"]
    suites = list(S0["suites"])
    rows = [r for r in S0["rows"] if r != ref]
    lines = [f"cfjax sweep — {payload['method']} — {payload['backbone']}",
             f"gain over {ref} (pp) with paired task-bootstrap 95% intervals; grid {payload['axes']}"
             + (" (quick)" if payload["quick"] else ""), ""]
    w = 22
    for r in rows:
        lines.append(f"{r} − {ref}")
        lines.append(f"  {'point':<34}" + "".join(f"{s:>{w}}" for s in suites + ["mean"]))
        for p in pts:
            cells = [fmt_interval(_gain(p, r, ref, s), signed=True) for s in suites]
            cells.append(fmt_interval(_gain(p, r, ref), signed=True))
            lines.append(f"  {_point_label(p['point']):<34}" + "".join(f"{c:>{w}}" for c in cells))
        lines.append("")
    lines.append("Verdict — grid points where the interval lies above 0 / contains 0 / lies below 0:")
    for r, per in payload["verdicts"].items():
        lines.append(f"  {r:<20}" + "  ".join(
            f"{s}: {c['above']}/{c['contains']}/{c['below']}" for s, c in per.items()))
    return "\n".join(lines)


def draw_sweep(payload: dict, out: str | Path) -> list[Path]:
    """``sweep_<row>.png``: the mean gain over the reference per grid point (first two axes), each
    cell annotated with its interval; hatched where the interval contains 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = list(payload["axes"])
    if not axes:
        return []
    ref = payload["reference"]
    xs = payload["axes"][axes[0]]
    ys = payload["axes"][axes[1]] if len(axes) > 1 else [None]
    written = []
    rows = [r for r in payload["points"][0]["summary"]["rows"] if r != ref]
    for r in rows:
        grid = np.full((len(ys), len(xs)), np.nan)
        notes: dict = {}
        for p in payload["points"]:
            pt = p["point"]
            if any(pt[a] != payload["axes"][a][0] for a in axes[2:]):  # further axes: their first value
                continue
            i = ys.index(pt[axes[1]]) if len(axes) > 1 else 0
            j = xs.index(pt[axes[0]])
            iv = _gain(p, r, ref)
            if iv is not None and np.isnan(grid[i, j]):
                grid[i, j] = iv["mean"]
                notes[(i, j)] = iv
        fig, ax = plt.subplots(figsize=(1.9 * len(xs) + 2, 1.3 * len(ys) + 1.6))
        lim = max(1.0, float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 1.0)
        im = ax.imshow(grid, cmap="RdBu", vmin=-lim, vmax=lim, origin="lower", aspect="auto")
        for (i, j), iv in notes.items():
            ax.text(j, i, f"{iv['mean']:+.1f}\n[{iv['lo']:+.1f}, {iv['hi']:+.1f}]", ha="center", va="center",
                    fontsize=8, color="k" if iv["lo"] <= 0 <= iv["hi"] else "w")
            if iv["lo"] <= 0 <= iv["hi"]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", lw=0))
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_xlabel(axes[0])
        if len(axes) > 1:
            ax.set_yticks(range(len(ys)), [str(y) for y in ys])
            ax.set_ylabel(axes[1])
        else:
            ax.set_yticks([])
        fig.colorbar(im, ax=ax, label=f"{r} − {ref} (pp, mean over suites)")
        ax.set_title(f"{payload['method']}: {r} − {ref}, 95% intervals (hatched: contains 0)\n"
                     f"{payload['backbone']}", fontsize=8)
        fig.tight_layout()
        p = Path(out) / f"sweep_{r}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)
    return written
