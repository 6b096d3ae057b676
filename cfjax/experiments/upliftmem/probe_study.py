"""``cfjax upliftmem probe-study``: can a probe rule serve the retrieval decision better than random?

papers/upliftmem.md §4.3 (EVSI values the *local decisions* a probe informs), §5.5 RQ4 (EVSI against
random, MC-STD and EIG under one probe budget), App. A.6 (decision value ≠ information quantity), B.2.
Issue 22 item 1: the earlier synthetic study (:mod:`cfjax.uplift.synthetic`, its default
``ProbeStudy``) could not tell strategies apart — its oracles had no headroom, 84% of its labels were
0, and its metric was global ranking on tasks that are never probed. This study first shows there is
room, then scores the decision the probes serve.

**Protocol** (every number fixed here; :data:`DECISION_SPEC`, :func:`study_config`, :data:`BUDGETS`,
``N_WINDOW``, ``DRAFT_SEEDS``). Per seed, a fresh synthetic domain (:class:`~cfjax.uplift.synthetic.SyntheticDomain`)
with effects about twice the default (so fewer labels are 0), 16 build, 8 window and 16 held-out
tasks, ``K = 3``; one warm-up checkpoint (bootstrap probing on the build tasks, 64 value-only steps);
each window task enters the window at 4 draft seeds (its own no-memory reference each), so a set can be
probed several times — a paired label is one Bernoulli difference, and one draw says little. Every
strategy restores the same checkpoint and acquires up to each cumulative budget (16, 32, 64), each
event labelling its picks and making one value+policy update of 32 steps.

**Strategies.** ``evsi`` — the paper's rule as issue 22 asks for it (:func:`paper_probing`: the sibling
family, m' over all of ``C(c)``, bound pruning, a calibrated μ plus the BLR posterior mean, the
Bernoulli noise model in Σ and Ω, V per comparison; greedy ``argmax``, since the softmax's τ is not
given by the paper and a normalised V would need a new one); ``evsi_local`` — the library's earlier
defaults (the local family, the top-8 recalled memories, uncalibrated G, fixed noise, softmax with
τ = 0.01 on the summed V); ``mcstd``, ``eig``, ``random`` (on the ``evsi`` window); the analysis-only
oracles of :data:`~cfjax.uplift.synthetic.ORACLES`, which read the true Δ (largest label variance,
largest scorer error, largest true decision gain); ``none`` — the same updates, no new label.
:data:`ABLATIONS` put one of ``evsi``'s departures from the earlier defaults back each (``--strategies``).

**Metrics**, per budget: on the probed tasks, the beam-choice regret ``max_S Δ − Δ(beam)`` and the
accuracy of the scorer's sign on the fixed local comparisons (:func:`~cfjax.uplift.synthetic.decision_metrics`);
on the held-out tasks, the global pairwise accuracy. A strategy's score is the mean over the budgets
(the area under its curve); differences with random are paired by seed, with percentile-bootstrap 95%
intervals. **Headroom** first: the warm-up checkpoint's regret (what the true best beam choice would
remove) and each oracle against random.

All figures come from a synthetic world with a closed-form Δ, not from an LLM.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cfjax.config.uplift import LEGACY_PROBING, ProbingSection, UpliftConfig

__all__ = ["DECISION_SPEC", "BUDGETS", "STRATEGIES", "QUICK_STRATEGIES", "ABLATIONS", "study_config", "paper_probing",
           "run_probe_study", "format_probe_study", "probe_study_main"]

BUDGETS = (16, 32, 64)
N_WINDOW = 8
DRAFT_SEEDS = 4
STEPS_PER_UPDATE = 32
STRATEGIES = ("evsi", "evsi_local", "mcstd", "eig", "random", "oracle_var", "oracle_err", "oracle_gain", "none")
QUICK_STRATEGIES = ("evsi", "random", "oracle_err", "none")
#: ablations of ``evsi`` (not run by default; ``--strategies``): one departure of :func:`paper_probing` put back each
ABLATIONS = {"evsi_local_family": {"family": "local"}, "evsi_top8": {"probe_candidates": 8},
             "evsi_uncalibrated": {"calibration": "none", "posterior_mean": False},
             "evsi_fixed_noise": {"noise": "fixed"}, "evsi_softmax": {"mode": "softmax"}}
METRICS = (("decision_regret", "beam-choice regret on the probed tasks", -1),
           ("decision_local", "local-comparison accuracy on the probed tasks", +1),
           ("pairwise", "global pairwise accuracy on held-out tasks", +1))


def _spec():
    from cfjax.uplift.synthetic import SyntheticSpec

    return SyntheticSpec(helpful=(0.15, 0.35), harmful=(-0.35, -0.15), pair_single=-0.10, pair_bonus=0.55,
                         clash_single=(0.10, 0.22), clash_penalty=0.45)


#: the study's domain: the default layout with about twice the default effects
DECISION_SPEC = _spec()


def study_config() -> UpliftConfig:
    """:func:`~cfjax.uplift.synthetic.synthetic_config` with 32 steps per update and windows large enough
    for 8 tasks × 4 draft seeds (2,048 probes, 2,048 comparisons; bound pruning above that)."""
    from cfjax.uplift.synthetic import synthetic_config

    cfg = synthetic_config(steps_per_update=STEPS_PER_UPDATE)
    return dataclasses.replace(cfg, probing=dataclasses.replace(cfg.probing, max_pool=2048, max_comparisons=2048))


def paper_probing(p: ProbingSection) -> ProbingSection:
    """``p`` with B.2 / A.6 / A.4 as issue 22 reads them (module docstring; the library's defaults since)."""
    return dataclasses.replace(p, family="siblings", probe_candidates=0, prune="bound", calibration="scale",
                               posterior_mean=True, noise="bernoulli", normalize_values=True, mode="argmax")


def _probing_for(strategy: str, cfg: UpliftConfig) -> ProbingSection:
    if strategy == "evsi_local":
        return dataclasses.replace(cfg.probing, **LEGACY_PROBING)
    return dataclasses.replace(paper_probing(cfg.probing), **ABLATIONS.get(strategy, {}))


def _rule(strategy: str) -> str:
    """The acquisition rule a study strategy runs: EVSI for ``evsi`` and its variants."""
    return "evsi" if strategy == "evsi_local" or strategy in ABLATIONS else strategy


def run_probe_study(*, seeds: Sequence[int], strategies: Sequence[str] = STRATEGIES,
                    budgets: Sequence[int] = BUDGETS, log: Callable[[str], None] = print) -> dict:
    """Every seed × strategy (module docstring); returns the payload :func:`format_probe_study` prints."""
    from cfjax.uplift.synthetic import ProbeStudy

    cfg = study_config()
    per_seed = []
    for seed in seeds:
        t0 = time.perf_counter()
        st = ProbeStudy(int(seed), n_window=N_WINDOW, spec=DECISION_SPEC, cfg=cfg, draft_seeds=DRAFT_SEEDS)
        curves = {}
        for s in strategies:
            c = st.curve(_rule(s), budgets, probing=_probing_for(s, cfg))
            curves[s] = {k: c[k] for k in ("probes", "decision_regret", "decision_local", "pairwise", "regret")}
        per_seed.append({"seed": int(seed), "warm": {**st.warm, **st.warm_decision}, "untrained": st.untrained,
                         "curves": curves, "seconds": round(time.perf_counter() - t0, 1)})
        log(f"  seed {seed}: warm regret {st.warm_decision['regret']:.3f}, "
            + ", ".join(f"{s} {np.mean(curves[s]['decision_regret'][1:]):.3f}" for s in strategies)
            + f" ({per_seed[-1]['seconds']}s)")
    return {"seeds": [int(s) for s in seeds], "budgets": list(budgets), "strategies": list(strategies),
            "per_seed": per_seed, "summary": summarize(per_seed, strategies),
            "world": "synthetic set-uplift domain with a closed-form Δ (cfjax.uplift.synthetic), not an LLM",
            "protocol": {"spec": dataclasses.asdict(DECISION_SPEC), "n_window": N_WINDOW, "draft_seeds": DRAFT_SEEDS,
                         "steps_per_update": STEPS_PER_UPDATE,
                         "evsi_probing": dataclasses.asdict(paper_probing(cfg.probing)),
                         "evsi_local_probing": dataclasses.asdict(_probing_for("evsi_local", cfg)),
                         "training": dataclasses.asdict(cfg.training)}}


def _auc(curve: Sequence[float]) -> float:
    return float(np.mean(curve[1:]))


def summarize(per_seed: Sequence[dict], strategies: Sequence[str]) -> dict:
    """Per metric: each strategy's mean AUC and its paired difference with random (mean, lo, hi)."""
    from cfjax.uplift.synthetic import paired_bootstrap

    out: dict = {"headroom": {}}
    warm = [r["warm"]["regret"] for r in per_seed]
    out["headroom"]["warm_regret"] = dict(zip(("mean", "lo", "hi"), paired_bootstrap(warm)))
    for key, _, _ in METRICS:
        row = {}
        for s in strategies:
            auc = [_auc(r["curves"][s][key]) for r in per_seed]
            row[s] = {"auc": float(np.mean(auc)), "final": float(np.mean([r["curves"][s][key][-1] for r in per_seed]))}
            if s != "random" and "random" in strategies:
                d = [a - _auc(r["curves"]["random"][key]) for a, r in zip(auc, per_seed)]
                row[s]["minus_random"] = dict(zip(("mean", "lo", "hi"), paired_bootstrap(d)))
        out[key] = row
    return out


def half_widths(summary: dict, key: str = "decision_regret") -> dict[str, float]:
    """Half-width of each strategy − random interval on ``key``."""
    return {s: (v["minus_random"]["hi"] - v["minus_random"]["lo"]) / 2
            for s, v in summary[key].items() if "minus_random" in v}


def format_probe_study(payload: dict) -> str:
    sm, st = payload["summary"], payload["strategies"]
    h = sm["headroom"]["warm_regret"]
    lines = [f"Probe study — {len(payload['seeds'])} seeds, budgets {payload['budgets']} ({payload['world']})",
             f"headroom: the true best beam choice removes the warm-up regret {h['mean']:.3f} [{h['lo']:.3f}, "
             f"{h['hi']:.3f}]; widest strategy − random half-width on the regret AUC "
             f"{max(half_widths(sm).values(), default=float('nan')):.3f}"]
    for key, title, sign in METRICS:
        better = "lower" if sign < 0 else "higher"
        lines.append(f"{title} (mean over budgets; {better} is better) — strategy: AUC, at {payload['budgets'][-1]}, "
                     "− random [95% CI, paired by seed]")
        for s in st:
            v = sm[key][s]
            d = v.get("minus_random")
            diff = f"{d['mean']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]" if d else "—"
            lines.append(f"  {s:<12} {v['auc']:.4f}  {v['final']:.4f}  {diff}")
    return "\n".join(lines)


def probe_study_main(*, out: str | Path, seeds: Sequence[int] | None = None, quick: bool = False,
                     strategies: Sequence[str] | None = None, log: Callable[[str], None] = print,
                     existing: str = "refuse") -> dict:
    """``cfjax upliftmem probe-study``: writes ``probe_study.json`` and ``probe_study.txt`` in ``out``.
    Default seeds 100–123 (24; ``--quick``: 100–103 and :data:`QUICK_STRATEGIES`)."""
    from cfjax.experiments.common import write_results
    from cfjax.infra.io import prepare_output_dir

    if strategies is not None:
        bad = [s for s in strategies if s not in STRATEGIES and s not in ABLATIONS]
        if bad:
            from cfjax.config import ConfigError

            raise ConfigError(f"unknown probe-study strategy {bad[0]!r} (one of {', '.join(STRATEGIES + tuple(ABLATIONS))})")
    seeds = list(seeds) if seeds else list(range(100, 104 if quick else 124))
    strategies = list(strategies or (QUICK_STRATEGIES if quick else STRATEGIES))
    out = Path(out)
    prepare_output_dir(out, existing=existing, owned=["probe_study.json", "probe_study.txt"], resumable=False,
                       command="cfjax upliftmem probe-study")
    log(f"cfjax upliftmem probe-study: seeds {seeds[0]}–{seeds[-1]} ({len(seeds)}), strategies {strategies} → {out}")
    t0 = time.perf_counter()
    payload = run_probe_study(seeds=seeds, strategies=strategies, log=log)
    payload["seconds"] = round(time.perf_counter() - t0, 1)
    write_results(out, payload, text=format_probe_study(payload), log=log, name="probe_study.json",
                  report="probe_study.txt")
    return payload
