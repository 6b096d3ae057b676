"""Aggregate per-unit results into the paper's tables and figures (Table 1, Fig. 2–4, 8).

:func:`aggregate` turns the list of (suite, split seed, backbone seed) unit
results of :func:`cfjax.experiments.countermem.runner.run_jobs` into one summary:

* every success figure with a paired task-bootstrap 95% interval
  (:mod:`cfjax.experiments.stats`; clusters = splits, tasks resampled, seeds
  kept inside a task), every row's difference against ``none`` and every
  ablation's difference against ``cf_memory``, each with its interval; the
  ``mean`` column weighs suites equally, as Table 1 does;
* ratios with small denominators (coverage, harmful use, changes per
  retrieved record) *pooled* over units — summed numerators over summed
  denominators; rescued/broken counts summed over units; ``success_std`` is
  the spread over units, kept for reference.

:func:`collect_outcomes` gathers the per-task paired outcomes (saved in
``results.json``); :func:`format_report` prints the tables;
:func:`draw_figures` writes PNGs with the intervals drawn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cfjax.experiments.countermem.rows import RETENTION_RULES, row_specs, rows_in
from cfjax.experiments.countermem.studies import forgetting
from cfjax.experiments.stats import Cluster, bootstrap, fmt_interval, paired_difference
from cfjax.domains.base import TRANSFER_CONDITIONS

__all__ = ["aggregate", "collect_outcomes", "format_report", "draw_figures", "load_results", "outcome_clusters",
           "interval"]

_RATIO_PARTS = {
    "coverage": ("covered", "opportunities"),
    "harmful_use": ("harmful_uses", "selected_uses"),
    "action_changes_per_retrieved": ("action_changes", "retrieved_records"),
    "harmful_changes_per_retrieved": ("harmful_changes", "retrieved_records"),
    "calls_per_solved": ("eval_calls", "n_solved"),
    "failed_per_solved": ("failed", "n_solved"),
}


def _transfer_rows() -> list[str]:
    """The rows of the transfer figure (App. D.4): those whose spec says so."""
    return [n for n, spec in row_specs().items() if spec.transfer]


def _ablation_rows() -> list[str]:
    """The rows reported against the full method as well (§6, App. E.3)."""
    return [n for n, spec in row_specs().items() if spec.paired == "cf_memory"]


def _mean_std(vals: Sequence[float | None]) -> tuple[float | None, float | None]:
    v = [x for x in vals if x is not None]
    if not v:
        return None, None
    return float(np.mean(v)), float(np.std(v))


def _pool(blocks: Sequence[dict], key: str) -> float | None:
    num, den = _RATIO_PARTS[key]
    if any(b.get(key) is None and b.get(den) for b in blocks):
        return None
    d = sum(b.get(den, 0) or 0 for b in blocks)
    return sum(b.get(num, 0) or 0 for b in blocks) / d if d else None


def _summarise(blocks: Sequence[dict], memory: bool) -> dict:
    mean, std = _mean_std([b.get("success") for b in blocks])
    out = {"success": mean, "success_std": std, "seeds": len(blocks),
           "tokens": _mean_std([b.get("tokens") for b in blocks])[0],
           "n_tasks": _mean_std([b.get("n_tasks") for b in blocks])[0]}
    for k in ("calls_per_solved", "failed_per_solved"):
        out[k] = _pool(blocks, k)
    for k in ("coverage", "harmful_use", "action_changes_per_retrieved", "harmful_changes_per_retrieved"):
        out[k] = _pool(blocks, k) if memory else None
    for k in ("selected_uses", "harmful_uses", "rescued", "broken", "net"):
        if any(k in b for b in blocks):
            out[k] = int(sum(b.get(k, 0) or 0 for b in blocks))
    out["memory_tokens_per_task"] = _mean_std([b.get("memory_tokens_per_task") for b in blocks])[0]
    return out


def _memory_row(row: str) -> bool:
    spec = row_specs().get(row)
    return True if spec is None else spec.memory


def collect_outcomes(units: Sequence[dict]) -> dict:
    """Per-task paired outcomes: ``suite → str(split seed) → {"task_ids", "seeds", "conditions",
    "rows": {row: [[0/1 per task] per backbone seed]}}`` (a row is kept where every seed of the
    split ran it; the format :func:`cfjax.experiments.stats.clusters_from_outcomes` reads)."""
    out: dict = {}
    for u in units:
        if "outcomes" not in u:
            continue
        blk = out.setdefault(u["suite"], {}).setdefault(str(u.get("split_seed", 0)), {
            "task_ids": u["eval_ids"], "seeds": [], "conditions": u.get("conditions_by_task"), "rows": {}})
        if blk["task_ids"] != u["eval_ids"]:
            raise ValueError(f"units of {u['suite']} split {u.get('split_seed')} evaluate different tasks")
        blk["seeds"].append(u["seed"])
        for r, v in u["outcomes"].items():
            blk["rows"].setdefault(r, []).append(v)
    for splits in out.values():
        for blk in splits.values():
            blk["rows"] = {r: v for r, v in blk["rows"].items() if len(v) == len(blk["seeds"])}
    return out


def outcome_clusters(outcomes: dict, suites: Sequence[str], condition: str | None = None) -> list[Cluster]:
    """Clusters of ``suites`` (each suite weighs the same, each split inside it the same), optionally
    restricted to the held-out tasks of one transfer condition."""
    names = [s for s in suites if s in outcomes]
    out = []
    for s in names:
        for blk in outcomes[s].values():
            cols = np.arange(len(blk["task_ids"]))
            if condition is not None:
                cols = np.array([i for i, c in enumerate(blk.get("conditions") or ()) if c == condition], int)
            if len(cols) == 0 or not blk["rows"]:
                continue
            out.append(Cluster({r: np.asarray(v, float)[:, cols] for r, v in blk["rows"].items()},
                               weight=1.0 / (len(names) * len(outcomes[s]))))
    return out


def interval(clusters: Sequence[Cluster], row: str, ref: str | None = None) -> dict | None:
    """The row's interval (or ``row − ref``), ``None`` when no cluster has both."""
    try:
        iv = bootstrap(clusters, row) if ref is None else paired_difference(clusters, row, ref)
    except ValueError:
        return None
    return iv.as_dict()


def _with_ci(m: dict, clusters: Sequence[Cluster], row: str, refs: Sequence[str] = ()) -> dict:
    m["ci"] = interval(clusters, row)
    for ref in refs:
        if ref != row:
            m[f"vs_{ref}"] = interval(clusters, row, ref)
    return m


def aggregate(units: Sequence[dict], outcomes: dict | None = None) -> dict:
    """Summary of every row, group and panel over units, per suite (and pooled ``all``), with
    paired bootstrap intervals from ``outcomes`` (default: :func:`collect_outcomes` of ``units``)."""
    outcomes = collect_outcomes(units) if outcomes is None else outcomes
    suites = list(dict.fromkeys(u["suite"] for u in units))
    seeds = sorted({u["seed"] for u in units})
    split_seeds = sorted({u.get("split_seed", 0) for u in units})
    specs = row_specs()
    rows = [r for r in specs if any(r in u["rows"] for u in units)]
    by_suite = {s: [u for u in units if u["suite"] == s] for s in suites}
    cl = {s: outcome_clusters(outcomes, [s]) for s in suites}
    cl["mean"] = outcome_clusters(outcomes, suites)

    def refs(r: str) -> tuple[str, ...]:
        return specs[r].refs

    table = {r: {s: _with_ci(_summarise([u["rows"][r] for u in by_suite[s] if r in u["rows"]], _memory_row(r)),
                             cl[s], r, refs(r))
                 for s in suites} for r in rows}
    table_mean = {r: _with_ci({}, cl["mean"], r, refs(r)) for r in rows}
    transfer: dict = {}
    for s in suites + ["all"]:
        us = units if s == "all" else by_suite[s]
        transfer[s] = {}
        for r in _transfer_rows():
            if not any(r in u["rows"] for u in us):
                continue
            transfer[s][r] = {}
            for c in TRANSFER_CONDITIONS:
                blocks = [u["rows"][r]["by_condition"][c] for u in us
                          if r in u["rows"] and c in u["rows"][r].get("by_condition", {})]
                if blocks:
                    transfer[s][r][c] = _with_ci(_summarise(blocks, _memory_row(r)),
                                                 outcome_clusters(outcomes, suites if s == "all" else [s], c), r,
                                                 ("none",))
    no_cond: dict = {}
    for s in suites + ["all"]:
        us = units if s == "all" else by_suite[s]
        if not any("no_condition" in u["rows"] for u in us):
            continue
        no_cond[s] = {}
        for r in ("cf_memory", "no_condition"):
            ordinary = [u["rows"][r]["by_condition"][c] for u in us for c in ("same_env", "new_env", "new_surface")
                        if c in u["rows"][r].get("by_condition", {})]
            look = [u["rows"][r]["by_condition"]["look_alike"] for u in us
                    if "look_alike" in u["rows"][r].get("by_condition", {})]
            no_cond[s][r] = {
                "ordinary": _pool(ordinary, "harmful_use"), "look_alike": _pool(look, "harmful_use"),
                "ordinary_uses": sum(b["selected_uses"] for b in ordinary),
                "look_alike_uses": sum(b["selected_uses"] for b in look),
                "ordinary_success": _mean_std([b["success"] for b in ordinary])[0],
                "look_alike_success": _summarise(look, True)["success"] if look else None,
            }
    retention: dict = {}
    accumulation: dict = {}
    budget: dict = {}
    for s in suites:
        us = [u for u in by_suite[s] if "retention" in u.get("groups", {})]
        if us:
            retention[s] = {"capacity": [u["groups"]["retention"]["capacity"] for u in us]}
            for rule in RETENTION_RULES:
                retention[s][rule] = _with_ci(_summarise([u["groups"]["retention"]["rules"][rule] for u in us], True),
                                              cl[s], f"retention_{rule}", ("none", "retention_utility"))
        us = [u for u in by_suite[s] if "accumulation" in u.get("groups", {})]
        if us:
            marks = sorted({int(n) for u in us for n in u["groups"]["accumulation"]["checkpoints"]})
            accumulation[s] = {"stream": [u["groups"]["accumulation"]["stream"] for u in us],
                               "skipped": sorted({n for u in us for n in u["groups"]["accumulation"]["skipped"]}),
                               "checkpoints": {}}
            for n in marks:
                blocks = [u["groups"]["accumulation"]["checkpoints"][str(n)] for u in us
                          if str(n) in u["groups"]["accumulation"]["checkpoints"]]
                summ = _with_ci(_summarise(blocks, True), cl[s], f"accumulation_{n}", ("none",))
                summ["records"] = _mean_std([b.get("records") for b in blocks])[0]
                accumulation[s]["checkpoints"][str(n)] = summ
            accumulation[s]["forgetting"] = {"cf_memory": forgetting([u["groups"]["accumulation"]["checkpoints"]
                                                                      for u in us])}
            names = sorted({k for u in us for k in u["groups"]["accumulation"].get("systems", {})})
            accumulation[s]["systems"] = {}
            for name in names:
                pts = [u["groups"]["accumulation"]["systems"][name] for u in us
                       if name in u["groups"]["accumulation"].get("systems", {})]
                accumulation[s]["systems"][name] = {
                    n: _with_ci(_summarise([p[n] for p in pts if n in p], True), cl[s], f"accumulation_{name}_{n}",
                                ("none",)) for n in sorted({n for p in pts for n in p}, key=int)}
                accumulation[s]["forgetting"][name] = forgetting(pts)
        us = [u for u in by_suite[s] if u.get("groups", {}).get("token_budget", {}).get("rows")]
        if us:
            budget[s] = {"budget": us[0]["groups"]["token_budget"]["budget"], "rows": {}}
            for row in dict.fromkeys(r for u in us for r in u["groups"]["token_budget"]["rows"]):
                blocks = [u["groups"]["token_budget"]["rows"][row] for u in us
                          if row in u["groups"]["token_budget"]["rows"]]
                summ = _with_ci(_summarise(blocks, True), cl[s], f"budget_{row}", ("none",))
                for k in ("spent", "source_tasks", "eval_tokens"):
                    summ[k] = _mean_std([b.get(k) for b in blocks])[0]
                budget[s]["rows"][row] = summ
    construction = {r: {s: {k: _mean_std([u["rows"][r]["construction"][k] for u in by_suite[s]
                                          if "construction" in u["rows"].get(r, {})])[0]
                            for k in ("llm_calls", "tokens", "eval_calls")}
                        for s in suites if any("construction" in u["rows"].get(r, {}) for u in by_suite[s])}
                    for r in rows}
    construction = {r: v for r, v in construction.items() if v}
    return {"suites": suites, "seeds": seeds, "split_seeds": split_seeds, "units": len(units), "rows": rows,
            "construction": construction,
            "table": table, "table_mean": table_mean, "transfer": transfer,
            "no_condition": no_cond, "retention": retention, "accumulation": accumulation,
            "token_budget": budget}


# --------------------------------------------------------------------------- text


def _f(v, spec: str = ".1f") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return format(v, spec)


def _pm(m: dict | None) -> str:
    """A success cell: ``mean [lo, hi]`` from the bootstrap interval (``—`` without data)."""
    if not m or m.get("success") is None:
        return "—"
    return fmt_interval(m.get("ci")) if m.get("ci") else f"{m['success']:.1f}"


def _verdict(iv: dict | None) -> str:
    if not iv:
        return ""
    return "  ↑" if iv["lo"] > 0 else ("  ↓" if iv["hi"] < 0 else "   ")


def format_report(summary: dict, *, backbone: str, agent: str | None = None) -> str:
    """Table 1 (domains as columns), the differences with their intervals, and the §5–6 panels.

    ``agent`` (a base agent's title, e.g. ``"Reflexion"``) heads Table 1 with the agent its rows ran on."""
    suites, rows, T = summary["suites"], summary["rows"], summary["table"]
    TM = summary.get("table_mean", {})
    w = 21
    n_units = summary.get("units")
    out = [f"CounterMem — {backbone}",
           f"held-out success (0–100) with paired task-bootstrap 95% intervals; backbone seeds {summary['seeds']}, "
           f"split seeds {summary.get('split_seeds', '?')}" + (f" ({n_units} units)" if n_units else ""), ""]
    nw = max([20] + [len(r) + 1 for r in rows])  # the row-name column fits every row's name
    head = f"{'row':<{nw}}" + "".join(f"{s:>{w}}" for s in suites) + f"{'mean':>{w}}{'tokens(k)':>11}  calls/solved"
    ablations = [r for r in _ablation_rows() if r in rows]
    sections = [("Table 1 — memory mechanisms" + (f", base agent {agent}" if agent else ""), rows_in("table1", rows)),
                ("§6 / App. E.3 ablations", ablations)]
    for title, rs in sections:
        if not rs:
            continue
        out += [title, head]
        for r in rs:
            cells = [_pm(T[r][s]) for s in suites]
            mean = fmt_interval(TM.get(r, {}).get("ci")) if TM.get(r, {}).get("ci") else "—"
            tok = sum((T[r][s].get("tokens") or 0) for s in suites) / 1000
            cps_txt = "/".join(_f(T[r][s].get("calls_per_solved"), ".2f") for s in suites)
            out.append(f"{r:<{nw}}" + "".join(f"{c:>{w}}" for c in cells) + f"{mean:>{w}}{tok:>11.1f}  {cps_txt}")
        out.append("")
    for ref, title, rs in (("none", "Difference against none (pp, paired; ↑/↓: the interval excludes 0)",
                            [r for r in rows if r != "none"]),
                           ("cf_memory", "Ablations against the full method cf_memory (pp, paired)", ablations)):
        rs = [r for r in rs if any(T[r][s].get(f"vs_{ref}") for s in suites)]
        if not rs:
            continue
        out += [title, f"{'row':<{nw}}" + "".join(f"{s:>{w + 3}}" for s in suites) + f"{'mean':>{w + 3}}"]
        for r in rs:
            ivs = [T[r][s].get(f"vs_{ref}") for s in suites] + [TM.get(r, {}).get(f"vs_{ref}")]
            out.append(f"{r:<{nw}}" + "".join(f"{fmt_interval(iv, signed=True) + _verdict(iv):>{w + 3}}" for iv in ivs))
        out.append("")
    if any(r in rows for r in ("cf_memory", "random_retrieval", "shuffled_retrieval")):
        out.append("Fig. 4d — per retrieved record (pooled over seeds): action changes / harmful changes")
        for r in ("cf_memory", "random_retrieval", "shuffled_retrieval", "no_condition"):
            if r in rows:
                out.append(f"  {r:<{nw}}" + "".join(
                    f"{s}: {_f(T[r][s].get('action_changes_per_retrieved'), '.3f')} / "
                    f"{_f(T[r][s].get('harmful_changes_per_retrieved'), '.3f')}   " for s in suites))
        out.append("")
    out.append("Fig. 8a / App. E.3 — rescued / broken vs none (summed over units)")
    for r in rows:
        if r == "none":
            continue
        out.append(f"  {r:<{nw}}" + "".join(
            f"{s}: +{T[r][s].get('rescued', 0)}/-{T[r][s].get('broken', 0)} (net {T[r][s].get('net', 0):+d})   "
            for s in suites))
    out.append("")
    tr = summary["transfer"].get("all", {})
    if tr:
        out.append("Fig. 3 — transfer conditions, all suites pooled: success [95% interval] | "
                   "coverage | harmful use")
        out.append(f"  {'row':<{nw}}" + "".join(f"{c:>38}" for c in TRANSFER_CONDITIONS))
        for r in tr:  # one line per row (the memory rows are many), one column per condition
            cells = []
            for c in TRANSFER_CONDITIONS:
                m = tr[r].get(c)
                cells.append("—" if m is None else
                             f"{_pm(m)} | {_f(m['coverage'], '.2f')} | {_f(m['harmful_use'], '.3f')}")
            out.append(f"  {r:<{nw}}" + "".join(f"{x:>38}" for x in cells))
        out.append("")
    nc = summary["no_condition"]
    if nc:
        out.append("App. E.3 / Fig. 8b — harmful use per selected use, with vs without the condition c "
                   "(pooled over seeds)")
        for s, d in nc.items():
            a, b = d["cf_memory"], d["no_condition"]
            out.append(f"  {s:<8} ordinary: {_f(a['ordinary'], '.3f')} → {_f(b['ordinary'], '.3f')} "
                       f"(uses {a['ordinary_uses']} → {b['ordinary_uses']});  look-alike: "
                       f"{_f(a['look_alike'], '.3f')} → {_f(b['look_alike'], '.3f')} "
                       f"(uses {a['look_alike_uses']} → {b['look_alike_uses']})")
        out.append("")
    if summary["retention"]:
        out.append("Fig. 2d — retention rules at equal capacity: success [95% interval]")
        for s, d in summary["retention"].items():
            out.append(f"  {s:<8} capacity {d['capacity']}: " + "  ".join(
                f"{rule} {_pm(d[rule])}" for rule in RETENTION_RULES))
        out.append("")
    if summary["accumulation"]:
        out.append("Fig. 2a — accumulation: success (records) after n source tasks, one fixed selector")
        for s, d in summary["accumulation"].items():
            pts = "  ".join(f"{n}: {_pm(m)} ({_f(m['records'], '.0f')})" for n, m in d["checkpoints"].items())
            skip = f"  [skipped {d['skipped']}: stream has {min(d['stream'])} tasks]" if d["skipped"] else ""
            out.append(f"  {s:<8} {pts}{skip}")
            for name, cps in d.get("systems", {}).items():
                out.append(f"  {'':<8} {name}: " + "  ".join(f"{n}: {_pm(m)}" for n, m in cps.items()))
        lost = [(s, name, f) for s, d in summary["accumulation"].items()
                for name, f in d.get("forgetting", {}).items() if f]
        if lost:
            out.append("")
            out.append("Fig. 2c — score lost on the earliest stream tasks as memory grows: success on them with the "
                       "snapshot after n source tasks, minus with the first snapshot that had seen them "
                       "(points, paired 95% interval)")
            for s, name, f in lost:
                out.append(f"  {s:<8} {name:<16} at {f['reference']}: {fmt_interval(f['success'][str(f['reference'])])}"
                           "  " + "  ".join(f"{n}: {fmt_interval(iv, signed=True)}" for n, iv in f["lost"].items()))
    if summary.get("construction"):
        out.append("")
        out.append("Construction cost per unit (mean; the task-run costs above are the held-out runs'): "
                   "backbone calls / tokens / evaluator calls of building each row's memory")
        for r, per in summary["construction"].items():
            out.append(f"  {r:<24} " + "  ".join(
                f"{s}: {_f(c['llm_calls'], ',.0f')} / {_f(c['tokens'], ',.0f')} / {_f(c['eval_calls'], ',.0f')}"
                for s, c in per.items()))
    if summary.get("token_budget"):
        out.append("")
        out.append("Fig. 7 / App. E.2 — every row at one construction-token budget per unit: success [95% interval], "
                   "vs none, construction tokens actually spent, source tasks consumed, held-out tokens")
        for s, d in summary["token_budget"].items():
            out.append(f"  {s} (budget {d['budget']:,} tokens per unit)")
            for row, m in d["rows"].items():
                out.append(f"    {row:<24} {_pm(m)}  vs none {fmt_interval(m.get('vs_none'), signed=True)}  "
                           f"spent {_f(m['spent'], ',.0f')}  "
                           f"source tasks {_f(m['source_tasks'], '.0f')}  held-out tokens {_f(m['eval_tokens'], ',.0f')}")
    return "\n".join(out)


# --------------------------------------------------------------------------- figures


def _bounds(ms: Sequence[dict], ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([(m.get("ci") or {}).get("lo", y) for m, y in zip(ms, ys)], float)
    hi = np.array([(m.get("ci") or {}).get("hi", y) for m, y in zip(ms, ys)], float)
    return lo, hi


def _yerr(ms: Sequence[dict], ys: np.ndarray) -> np.ndarray:
    """matplotlib's asymmetric ``yerr`` from each cell's 95% interval (0 where it has none)."""
    lo, hi = _bounds(ms, ys)
    return np.nan_to_num(np.array([ys - lo, hi - ys]), nan=0.0)


def load_results(run_dir: str | Path) -> dict:
    p = Path(run_dir) / "results.json"
    if not p.exists():
        raise FileNotFoundError(f"no results.json in {run_dir}: run `cfjax countermem run --out {run_dir}` first")
    data = json.loads(p.read_text())
    if "summary" not in data:
        raise ValueError(f"{p} has no 'summary' (not written by `cfjax countermem run`)")
    return data


def draw_figures(results: dict, out_dir: str | Path) -> list[Path]:
    """accumulation.png, retention.png, transfer.png, ablations.png, rescued_broken.png (those with data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    S = results["summary"]
    label = results.get("backbone", "")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    suites = S["suites"]

    def save(fig, name: str) -> None:
        fig.suptitle(f"{fig._suptitle.get_text() if fig._suptitle else ''}\n{label}", fontsize=8)
        fig.tight_layout()
        p = out / name
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)

    if S["accumulation"]:
        fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(15, 4))
        for ci, (s, d) in enumerate(S["accumulation"].items()):
            color = f"C{ci}"
            lines = [("CF Memory", d["checkpoints"], "-")] + [(name, cps, "--") for name, cps in
                                                               d.get("systems", {}).items()]
            for what, cps, style in lines:
                xs = [int(n) for n in cps]
                ys = np.array([cps[str(n)]["success"] for n in xs], float)
                lo, hi = _bounds([cps[str(n)] for n in xs], ys)
                ax.plot(xs, ys, style, marker="o", color=color, label=f"{s} {what}")
                ax.fill_between(xs, lo, hi, alpha=0.15, color=color)
                mt = [cps[str(n)].get("memory_tokens_per_task") for n in xs]
                bx.plot(xs, [np.nan if v is None else v for v in mt], style, marker="o", color=color,
                        label=f"{s} {what}")
            for name, f in d.get("forgetting", {}).items():
                if not f:
                    continue
                xs = [f["reference"]] + [int(n) for n in f["lost"]]
                ys = np.array([0.0] + [f["lost"][str(n)]["mean"] for n in xs[1:]], float)
                lo = np.array([0.0] + [f["lost"][str(n)]["lo"] for n in xs[1:]], float)
                hi = np.array([0.0] + [f["lost"][str(n)]["hi"] for n in xs[1:]], float)
                cx.plot(xs, ys, "-" if name == "cf_memory" else "--", marker="o", color=color, label=f"{s} {name}")
                cx.fill_between(xs, lo, hi, alpha=0.15, color=color)
        ax.set_xlabel("source tasks processed")
        ax.set_ylabel("held-out success")
        ax.set_title("(a) accumulation (solid CF Memory, dashed ReasoningBank; 95% band)", fontsize=9)
        ax.legend(fontsize=6)
        bx.set_xlabel("source tasks processed")
        bx.set_ylabel("tokens per task")
        bx.set_title("(b) retrieval + context tokens per task")
        cx.axhline(0.0, color="#888", lw=0.8)
        cx.set_xlabel("source tasks processed")
        cx.set_ylabel("points vs the first snapshot")
        cx.set_title("(c) score on the earliest stream tasks (paired 95% band)", fontsize=9)
        cx.legend(fontsize=6)
        save(fig, "accumulation.png")
    if S["retention"]:
        fig, ax = plt.subplots(figsize=(6, 4))
        width = 0.8 / len(RETENTION_RULES)
        for j, rule in enumerate(RETENTION_RULES):
            ms = [S["retention"][s][rule] for s in S["retention"]]
            ys = np.array([m["success"] for m in ms], float)
            ax.bar(np.arange(len(ys)) + j * width, ys, width, yerr=_yerr(ms, ys), capsize=2, label=rule)
        ax.set_xticks(np.arange(len(S["retention"])) + 0.4 - width / 2, list(S["retention"]))
        ax.set_ylabel("held-out success")
        ax.set_title("(d) retention rules at equal capacity (95% intervals)")
        ax.legend(fontsize=8)
        save(fig, "retention.png")
    tr = S["transfer"].get("all", {})
    if tr:
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
        rows = list(tr)
        width = 0.8 / len(rows)
        for k, (key, title) in enumerate((("success", "(a) success"), ("coverage", "(b) coverage"),
                                          ("harmful_use", "(c) harmful use per selected use"))):
            ax = axes[k]
            for j, r in enumerate(rows):
                ms = [tr[r].get(c) or {} for c in TRANSFER_CONDITIONS]
                ys = np.array([np.nan if m.get(key) is None else m[key] for m in ms], float)
                err = _yerr(ms, ys) if key == "success" else None
                ax.bar(np.arange(len(TRANSFER_CONDITIONS)) + j * width, ys, width, yerr=err, capsize=2, label=r)
            ax.set_xticks(np.arange(len(TRANSFER_CONDITIONS)) + 0.4 - width / 2, TRANSFER_CONDITIONS, fontsize=8)
            ax.set_title(title)
        axes[0].legend(fontsize=7, loc="lower left", framealpha=0.9)
        save(fig, "transfer.png")
    T = S["table"]
    abl = [r for r in _ablation_rows() + ["cf_memory"] if r in T]
    if len(abl) > 1:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.8 / len(suites)
        for j, s in enumerate(suites):
            ivs = [T[r][s].get("vs_none") or {} for r in abl]
            gains = np.array([np.nan if not iv else iv["mean"] for iv in ivs], float)
            err = np.array([[g - iv["lo"] if iv else 0.0 for g, iv in zip(gains, ivs)],
                            [iv["hi"] - g if iv else 0.0 for g, iv in zip(gains, ivs)]])
            axes[0].bar(np.arange(len(abl)) + j * width, gains, width, yerr=err, capsize=2, label=s)
            cps = [T[r][s]["calls_per_solved"] or np.nan for r in ["none"] + abl]
            axes[1].bar(np.arange(len(abl) + 1) + j * width, cps, width, label=s)
        axes[0].set_xticks(np.arange(len(abl)) + 0.4 - width / 2, abl, rotation=30, fontsize=8)
        axes[0].set_title("(a, c) success gain over none (pp, paired 95% intervals)")
        axes[0].axhline(0, color="k", lw=0.5)
        axes[1].set_xticks(np.arange(len(abl) + 1) + 0.4 - width / 2, ["none"] + abl, rotation=30, fontsize=8)
        axes[1].set_title("(b) evaluator calls per solved task")
        axes[0].legend(fontsize=8)
        save(fig, "ablations.png")
    rb = [r for r in S["rows"] if r != "none"]
    if rb:
        fig, ax = plt.subplots(figsize=(max(6, len(rb) * 0.9), 4))
        width = 0.8 / len(suites)
        for j, s in enumerate(suites):
            x = np.arange(len(rb)) + j * width
            ax.bar(x, [T[r][s].get("rescued", 0) for r in rb], width, label=f"{s} rescued")
            ax.bar(x, [-T[r][s].get("broken", 0) for r in rb], width, alpha=0.6)
            ax.scatter(x, [T[r][s].get("net", 0) for r in rb], marker="D", color="k", s=12)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xticks(np.arange(len(rb)) + 0.4 - width / 2, rb, rotation=30, fontsize=8)
        ax.set_title("rescued (up) / broken (down) tasks vs none, summed over seeds; ◆ net")
        ax.legend(fontsize=7)
        save(fig, "rescued_broken.png")
    return written
