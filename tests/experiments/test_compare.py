"""``cfjax compare`` on one suite with a tiny configuration (cfjax/experiments/compare.py).

One run of :func:`run_compare` (sql, one seed, 8 tasks per split, each method's smoke preset made smaller)
is shared by the tests below; the per-job results are captured by wrapping ``run_compare_job`` so the
tests can check what the payload alone does not show (each job's own task list and meter counts).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from cfjax.experiments import compare
from cfjax.experiments.compare import METHODS, CompareConfig, run_compare

N_TASKS = 8


def tiny_config() -> CompareConfig:
    q = CompareConfig.quick()
    up = q.upliftmem
    return dataclasses.replace(
        q, seeds=(0,), max_tasks=N_TASKS,
        antipersist=dataclasses.replace(q.antipersist, iterations=1, tasks_per_iteration=N_TASKS),
        upliftmem=dataclasses.replace(
            up, training=dataclasses.replace(up.training, warmup_steps=4, steps_per_update=2, bootstrap_sets=1),
            probing=dataclasses.replace(up.probing, budget=4, max_pool=64, max_comparisons=64)))


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    jobs = []
    original = compare.run_compare_job

    def capture(job):
        d = original(job)
        jobs.append(d)
        return d

    mp = pytest.MonkeyPatch()
    mp.setattr(compare, "run_compare_job", capture)
    try:
        payload = run_compare(out, suites=["sql"], cfg=tiny_config(), workers=1, log=lambda s: None)
    finally:
        mp.undo()
    return out, payload, jobs


def _rows(payload):
    block = payload["outcomes"]["sql"][str(payload["split_seed"])]
    return block["task_ids"], block["rows"]


def test_every_row_on_the_same_tasks_with_binary_outcomes(compared):
    _, payload, jobs = compared
    ids, rows = _rows(payload)
    assert payload["rows"] == list(METHODS) and set(rows) == set(METHODS)
    assert 0 < len(ids) <= N_TASKS and len(set(ids)) == len(ids)
    assert sorted(j["method"] for j in jobs) == ["antipersist", "countermem", "upliftmem"]
    for j in jobs:  # each job evaluated exactly these tasks, in this order
        assert j["task_ids"] == ids, j["method"]
        for r, v in j["outcomes"].items():
            assert len(v) == len(ids), (j["method"], r)
    assert set(j for d in jobs for j in d["outcomes"]) == set(METHODS)
    for r in METHODS:
        assert len(rows[r]) == 1 and len(rows[r][0]) == len(ids)  # one seed × the tasks
        assert set(rows[r][0]) <= {0, 1}


def test_paired_differences_are_differences_of_means(compared):
    _, payload, _ = compared
    _, rows = _rows(payload)
    for scope in (payload["summary"], payload["per_suite"]["sql"]):
        for r in METHODS:
            assert scope["rows"][r]["success"]["mean"] == pytest.approx(100 * np.mean(rows[r]), abs=1e-6)
        assert len(scope["differences"]) == 6  # every pair once
        for name, d in scope["differences"].items():
            b, a = name.split(" - ")
            assert d["mean"] == pytest.approx(100 * (np.mean(rows[b]) - np.mean(rows[a])), abs=1e-6), name
            assert d["lo"] <= d["mean"] <= d["hi"]


def test_costs_and_metering(compared):
    _, payload, jobs = compared
    ids, _ = _rows(payload)
    n = len(ids)
    for scope in (payload["summary"], payload["per_suite"]["sql"]):
        costs = scope["costs"]
        assert set(costs) == set(METHODS)
        assert costs["none"]["train_llm_calls"] == costs["none"]["train_tokens"] == costs["none"]["train_eval_calls"] == 0
        for m in METHODS[1:]:
            assert costs[m]["train_llm_calls"] > 0 and costs[m]["train_tokens"] > 0, m
    for j in jobs:
        for r, c in j["cost"].items():
            ev = c["eval"]
            # every held-out task of every row: at least one draft and one evaluated attempt, at most the
            # attempt limit (2 evaluated attempts) — so no evaluation call is lost or counted twice
            assert n <= ev["eval_calls"] <= 2 * n, (r, ev)
            assert ev["llm_calls"] >= n and ev["tokens"] > 0, (r, ev)
    # UpliftMem keeps its own ledger (each execution's calls once, App. D.3, plus the writer's calls): the
    # meter, which wraps the backbone and the world, must see exactly the same training calls
    up = next(j for j in jobs if j["method"] == "upliftmem")["cost"]["upliftmem"]
    assert up["train"]["llm_calls"] == up["executions"]["ledger_llm_calls"]
    assert up["train"]["eval_calls"] == up["executions"]["ledger_eval_calls"]
    assert up["executions"]["total"] > 0 and up["executions"]["eval"] == 0  # evaluation is not training


def test_outputs_written(compared):
    out, payload, _ = compared
    for f in ("results.json", "report.txt", "compare.png", "config.toml"):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out / "results.json").read_text())
    assert saved["rows"] == list(METHODS) and saved["outcomes"] == json.loads(json.dumps(payload["outcomes"]))
    text = (out / "report.txt").read_text()
    assert "[sql]" in text and "vs none" in text and "scripted backbone" in text


def test_cli_refuses_non_empty_out(tmp_path, capsys):
    from cfjax.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me\n")
    assert main(["compare", "--suite", "sql", "--out", str(out), "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cfjax:") and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]  # nothing written, nothing removed
