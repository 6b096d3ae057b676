"""The Anti-Persistence runner: several split seeds, per-task paired outcomes in the shared format, every
success figure with its task-bootstrap interval, paired differences, the similarity profile."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from cfjax.antipersist.guidance import MODES
from cfjax.antipersist.protocol import APConfig
from cfjax.experiments.antipersist.runner import (ABLATIONS, METHOD, REFERENCE, aggregate, format_summary, format_table,
                                           run_all, summarize)
from cfjax.experiments.stats import clusters_from_outcomes, paired_difference

SMALL = dataclasses.replace(APConfig(), iterations=2, tasks_per_iteration=8, max_eval_tasks=10, seeds=(42, 43),
                            split_seeds=(12345, 1))


def test_default_split_seeds_keep_12345_first():
    cfg = APConfig()
    assert cfg.split_seeds == (12345, 1, 2) and len(cfg.seeds) == 3
    with pytest.raises(ValueError, match="split_seeds"):
        dataclasses.replace(cfg, split_seeds=())
    with pytest.raises(ValueError, match="more than once"):
        dataclasses.replace(cfg, split_seeds=(1, 1))
    with pytest.raises(ValueError, match="log_durability"):
        dataclasses.replace(cfg, log_durability="none")


def test_run_all_writes_paired_outcomes_and_intervals(tmp_path):
    rows = (REFERENCE, METHOD, "fixed_corrective")
    res = run_all(tmp_path, suites=("sql",), rows=rows, cfg=SMALL, workers=1, log=lambda s: None)
    out = res["outcomes"]
    assert set(out) == {"sql"} and set(out["sql"]) == {"12345", "1"}
    for split, blk in out["sql"].items():
        assert set(blk) == {"task_ids", "seeds", "rows"}
        assert blk["seeds"] == [42, 43] and len(blk["task_ids"]) == 10 and set(blk["rows"]) == set(rows)
        for r, m in blk["rows"].items():
            assert np.shape(m) == (2, 10) and {x for v in m for x in v} <= {0, 1}
    assert out["sql"]["12345"]["task_ids"] != out["sql"]["1"]["task_ids"]  # different splits
    p = res["suites"]["sql"]
    assert p["outcomes"] == out  # the per-suite file carries the same block
    on_disk = json.loads((tmp_path / "sql" / "results.json").read_text())
    assert on_disk["outcomes"] == out and json.loads((tmp_path / "results.json").read_text())["outcomes"] == out
    for j in p["jobs"]:  # the saved outcomes are the jobs' final held-out successes, task by task
        v = out["sql"][str(j["split_seed"])]["rows"][j["row"]][[42, 43].index(j["seed"])]
        assert 100.0 * np.mean(v) == pytest.approx(j["iterations"][-1]["success"])
    for r in rows:
        t = p["rows"][r]
        ci = t["final_success_ci"]
        assert t["final_success"] == pytest.approx(ci["mean"]) and ci["lo"] <= ci["mean"] <= ci["hi"]
        assert len(t["success_ci_by_iteration"]) == SMALL.iterations
        assert (r == REFERENCE) == (t[f"final_vs_{REFERENCE}"] is None)
        assert set(t["final_success_by_family"]) and all("lo" in v for v in t["final_success_by_family"].values())
    assert set(p["rows"][METHOD]["final_vs"]) == {REFERENCE, "fixed_corrective"}
    iv = paired_difference(clusters_from_outcomes(out), METHOD, REFERENCE)
    assert p["rows"][METHOD][f"final_vs_{REFERENCE}"]["mean"] == pytest.approx(iv.mean)
    sim = p["similarity"]
    assert sim["rho"] == SMALL.bandit.rho and sim["embed_text"] == "question_cues"
    assert set(sim["pairs"]) == {"question_cues", "paper"} and sim["pairs"]["question_cues"]["same_env_same_type"]["n"]
    assert set(sim["eval_neighbourhood_sim"]) == {METHOD}
    report = (tmp_path / "report.txt").read_text()
    assert "95%" in report and f"{METHOD} − row" in report and "below ρ" in report
    assert (tmp_path / "sql" / "split_1" / "seed_43" / f"{METHOD}.outcomes.jsonl").exists()
    assert (tmp_path / "sql" / "success_by_iteration.png").read_bytes()[:4] == b"\x89PNG"


def _fake_jobs(suite: str, solved: dict[str, str], splits=(12345, 1), seeds=(42, 43)) -> list[dict]:
    """Minimal job dicts: row → a 0/1 string over 4 held-out tasks (same for every split and seed)."""
    it = {"success": 0.0, "calls_per_task": 1.0, "mode_freq": {m: 0.25 for m in MODES}, "tokens_per_task": 1.0,
          "applied_per_task": 0.0, "branches": {}}
    jobs = []
    for sp in splits:
        for r, s in solved.items():
            for sd in seeds:
                jobs.append({"suite": suite, "split_seed": sp, "row": r, "seed": sd,
                             "iterations": [dict(it, success=100.0 * s.count("1") / len(s))],
                             "task_ids": [f"{suite}/{sp}/{i}" for i in range(len(s))],
                             "task_families": ["a", "a", "b", "b"], "solved": [s], "eval_tasks": len(s),
                             "provenance": {"reproduced": 0, "flagged": 0}})
    return jobs


def test_aggregate_and_summary_pair_every_row_with_the_reference_and_the_method_with_its_ablations():
    rows = (REFERENCE, METHOD) + ABLATIONS[:2]
    per_suite = {}
    for suite, ap in (("x", "1111"), ("y", "1100")):
        solved = {REFERENCE: "0000", METHOD: ap, ABLATIONS[0]: "1000", ABLATIONS[1]: ap}
        per_suite[suite] = aggregate(_fake_jobs(suite, solved), suite=suite, rows=rows, cfg=SMALL, label="fake")
    x = per_suite["x"]["rows"]
    assert x[METHOD]["final_success_ci"] == {"mean": 100.0, "lo": 100.0, "hi": 100.0, "level": 0.95}
    assert x[METHOD][f"final_vs_{REFERENCE}"]["mean"] == 100.0 and x[METHOD]["final_vs"][ABLATIONS[0]]["mean"] == 75.0
    assert x[METHOD]["final_vs"][ABLATIONS[1]] == {"mean": 0.0, "lo": 0.0, "hi": 0.0, "level": 0.95}
    assert x[METHOD]["final_success_by_family"]["a"]["mean"] == 100.0
    y = per_suite["y"]["rows"]
    assert y[METHOD]["final_success_by_family"]["b"]["mean"] == 0.0
    outcomes = {s: p["outcomes"][s] for s, p in per_suite.items()}
    summ = summarize(outcomes, per_suite, rows)
    assert summ[METHOD]["mean"] == pytest.approx(75.0)  # each suite weighs the same
    assert summ[METHOD][f"mean_vs_{REFERENCE}"]["mean"] == pytest.approx(75.0)
    assert summ[REFERENCE][f"mean_vs_{REFERENCE}"] is None
    text = format_summary({"suites": per_suite, "summary": summ, "backbone": "fake", "split_seeds": [12345, 1],
                           "seeds": [42, 43]})
    assert "75.0 [" in text and "+75.0 [" in text
    assert "100.0 [100.0, 100.0]" in format_table(per_suite["x"])


def test_shared_world_reuses_completed_checks_across_processes_and_never_timeouts(tmp_path):
    from cfjax.experiments.antipersist.runner import SharedWorld
    from cfjax.types import Outcome, Task

    class Counting:
        def __init__(self):
            self.calls = 0

        def evaluate(self, task, action):
            self.calls += 1
            if action == "slow":
                return Outcome(0.0, False, False, "timed out", "timeout", 2.0)
            return Outcome(1.0, True, True, f"ok {action}", None, 0.1)

    t = Task("s/1", "q", "env", "ctx")
    path = str(tmp_path / "c.sqlite")
    a, b = Counting(), Counting()
    wa, wb = SharedWorld(a, path), SharedWorld(b, path)  # two "processes" on one file
    assert wa.evaluate(t, "x ") == Outcome(1.0, True, True, "ok x ", None, 0.1)
    assert wb.evaluate(t, " x") == wa.evaluate(t, "x") and (a.calls, b.calls) == (1, 0)
    for w in (wa, wb, wa):
        assert not w.evaluate(t, "slow").completed
    assert a.calls + b.calls == 4 and wb.hits == 1 and wb.misses == 1
    wa.close()
    wb.close()
