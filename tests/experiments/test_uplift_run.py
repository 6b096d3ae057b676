"""``cfjax upliftmem run`` end to end on a tiny configuration: outputs, intervals, costs, checkpoint."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from cfjax.cli import main
from cfjax.config import UpliftConfig
from cfjax.experiments.upliftmem.runner import ROWS, quick_config, run_all


def _tiny() -> UpliftConfig:
    cfg = quick_config(UpliftConfig())
    return dataclasses.replace(cfg, max_tasks=8, train_seeds=(0, 1), training=dataclasses.replace(cfg.training, warmup_steps=8),
                               probing=dataclasses.replace(cfg.probing, budget=8, max_pool=128, max_comparisons=128))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("um")
    combined = run_all(out, suites=["sql"], rows=("upliftmem", "base", "mem0"), cfg=_tiny(), workers=1,
                       log=lambda s: None)
    return out, combined


def test_outputs_and_rows(tiny_run):
    out, combined = tiny_run
    for f in ("config.toml", "results.json", "report.txt", "success.png", "sql/results.json",
              "sql/upliftmem/seed_0/pool.json", "sql/upliftmem/seed_1/pool.json", "sql/base/seed_0/pool.json"):
        assert (out / f).exists(), f
    assert not (out / ".world_cache").exists()
    payload = json.loads((out / "sql" / "results.json").read_text())
    assert payload["rows"] == [r for r in ROWS if r in ("no_memory", "similarity_topk", "upliftmem", "base")] + ["mem0"]
    assert "scripted backbone" in payload["backbone"]
    block = payload["outcomes"]["sql"]["12345"]
    n = len(block["task_ids"])
    for r in payload["rows"]:
        m = np.asarray(block["rows"][r])
        assert m.shape == (2, n) and set(np.unique(m)) <= {0, 1}  # 2 training seeds × 1 evaluation repeat
        t = payload["table"][r]
        assert t["success"]["lo"] <= t["success"]["mean"] <= t["success"]["hi"]
        assert t["success"]["mean"] == pytest.approx(100 * m.mean())
        if r != "no_memory":
            d = t["vs_no_memory"]
            assert d["mean"] == pytest.approx(100 * (m.mean() - np.mean(block["rows"]["no_memory"])))
    assert "vs_upliftmem" in payload["table"]["base"]
    # no_memory is the empty set, similarity_topk never exceeds K, all rows share the tasks
    assert payload["costs"]["no_memory"]["mean_set_size"] == 0
    assert 0 < payload["costs"]["similarity_topk"]["mean_set_size"] <= 5


def test_costs_count_every_execution_once(tiny_run):
    out, _ = tiny_run
    payload = json.loads((out / "sql" / "results.json").read_text())
    c = payload["costs"]["upliftmem"]["training"]  # means over the two training seeds
    parts = sum(c[p] for p in ("reference", "retrieved", "probe", "writing", "bootstrap"))
    assert parts == pytest.approx(c["total"]) and c["eval"] == 0
    assert c["eval_calls"] == c["ledger_eval_calls"]  # every evaluator call belongs to one execution
    assert c["ledger_llm_calls"] >= c["llm_calls"]  # plus the writer's and reviser's calls
    assert set(payload["train_logs"]) == {"upliftmem/seed_0", "upliftmem/seed_1", "base/seed_0", "base/seed_1",
                                          "mem0/seed_0", "mem0/seed_1"}
    # a peer (Table 1): built by its own pipeline from one memory-free episode per task UpliftMem learns from
    peer = payload["costs"]["mem0"]["training"]
    assert 8 < peer["total"] <= 3 * 8  # T_build ∪ T_train ∪ T_val, 8 tasks at most each
    assert peer["llm_calls"] > peer["total"] and peer["eval_calls"] >= peer["total"]
    assert payload["train_logs"]["mem0/seed_0"]["peer"] == "mem0"


def test_a_peer_row_pairs_with_no_memory_and_differs_by_training_seed_only_in_construction(tiny_run):
    """The peer's held-out draws are no_memory's (the same draft seeds): where it shows nothing, its
    episode is the memory-free one."""
    out, _ = tiny_run
    payload = json.loads((out / "sql" / "results.json").read_text())
    block = payload["outcomes"]["sql"]["12345"]
    assert np.asarray(block["rows"]["mem0"]).shape == np.asarray(block["rows"]["no_memory"]).shape
    assert "vs_upliftmem" in payload["table"]["mem0"] and "vs_no_memory" in payload["table"]["mem0"]
    log = payload["train_logs"]["upliftmem/seed_0"]
    assert log["h_effective"] >= 1 and len(log["windows"]) >= 1
    assert all(w["probes"] <= 8 for w in log["windows"])


def test_scorer_checkpoint_resumes(tiny_run):
    from cfjax.uplift.scorer import ScorerTrainer

    out, _ = tiny_run
    cfg = _tiny()
    tr = ScorerTrainer(cfg, d_ctx=cfg.retrieval.embed_dim, k_max=5, n_pool=cfg.retrieval.recall, seed=123)
    before = np.asarray(tr.params["head"]["kernel"]).copy()
    meta = tr.restore(out / "sql" / "upliftmem" / "seed_1" / "scorer")
    assert meta["suite"] == "sql" and meta["train_seed"] == 1 and meta["steps_done"] == tr.steps_done > 0
    assert not np.allclose(before, np.asarray(tr.params["head"]["kernel"]))


def test_cli_refuses_unknown_rows_and_existing_out(tmp_path, capsys):
    assert main(["upliftmem", "run", "--suite", "sql", "--out", str(tmp_path / "x"), "--rows", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown row" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "results.json").write_text("{}")
    assert main(["upliftmem", "run", "--suite", "sql", "--out", str(tmp_path / "y"), "--quick"]) == 2
