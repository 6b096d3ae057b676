"""The controlled MemSyco-like retrieval experiment (cfjax.experiments.upliftmem.controlled): a quick run on
one store at K = 5. Checks the protocol (fixed store, fixed executor, native = the suite's top-K), the
payload's shape and ranges — never the direction of the result."""

from __future__ import annotations

import pytest

from cfjax.config.uplift import UpliftConfig
from cfjax.experiments.upliftmem.memsyco import MemSycoConfig, MemSycoExecutor, build_suite, native_retrieve
from cfjax.experiments.upliftmem.controlled import (LABEL, METRICS, NATIVE, controlled_config, format_controlled,
                                                 run_controlled)
from cfjax.infra.ledger import Ledger

STORE, K = "mem0", 5


@pytest.fixture(scope="module")
def payload():
    cfg = controlled_config(UpliftConfig(), quick=True)
    return run_controlled(cfg, stores=(STORE,), k_values=(K,), variants=("upliftmem",), quick=True,
                          log=lambda s: None, n_boot=300)


def test_every_metric_for_every_row(payload):
    blk = payload["by_k"][str(K)]
    assert payload["rows"] == ["no_memory", NATIVE, "upliftmem"]
    for row in payload["rows"]:
        for m in METRICS:
            v = blk["average"][row][m]
            assert v is not None and 0.0 <= v <= 100.0, (row, m, v)
            v = blk["stores"][STORE]["rows"][row][m]
            assert v is not None and 0.0 <= v <= 100.0, (row, m, v)
    for m in METRICS:
        iv = blk["deltas"]["upliftmem"][m]
        assert iv["lo"] <= iv["mean"] <= iv["hi"], (m, iv)
        # the paired difference's point estimate is the table's difference
        assert iv["mean"] == pytest.approx(blk["average"]["upliftmem"][m] - blk["average"][NATIVE][m], abs=1e-9)
    text = format_controlled(payload)
    assert LABEL in text and "Native" in text and "Decision" in text


def test_store_and_executor_fixed(payload):
    suite = build_suite(MemSycoConfig.quick())
    _, test = suite.split(seed=42)
    st = payload["by_k"][str(K)]["stores"][STORE]
    assert st["checks"] == {"no_memory_identical": True, "native_identical": True, "variant_within_offer": True,
                            "native_is_suite_topk": True, "offered_is_whole_store": True}
    assert [t.task_id for t in test] == payload["suite"]["test_task_ids"]
    # both retrievers were offered the task's whole store (the suite's ids), in native order
    for t in test:
        store = suite.store(t, STORE)
        assert st["offered"][t.task_id] == [m.mem_id for m in native_retrieve(t, store, len(store))]
    for rep in range(payload["repeats"]):
        # native row = the suite's native top-K, exactly
        for t, s in zip(test, st["sets"][NATIVE][rep]):
            assert sorted(s) == sorted(m.mem_id for m in native_retrieve(t, suite.store(t, STORE), K))
        # the trained row picks from the same offer, at most K
        for t, s in zip(test, st["sets"]["upliftmem"][rep]):
            assert len(s) <= K and set(s) <= set(st["offered"][t.task_id])
        assert all(s == [] for s in st["sets"]["no_memory"][rep])
    # no-memory executions do not depend on the row: a fresh executor reproduces them
    cfg = controlled_config(UpliftConfig(), quick=True)
    ex = MemSycoExecutor(suite, suite.config, seed=payload["config"]["executor_seed"])
    for rep, seed in enumerate(payload["eval_seeds"]):
        fresh = [int(ex.execute(t, [], seed=seed, ledger=Ledger("t")).info["correct"]) for t in test]
        assert fresh == st["per_task"]["no_memory"]["correct"][rep]
    assert payload["eval_seeds"] == [cfg.eval_seed + r for r in range(payload["repeats"])]


def test_outcome_blocks(payload):
    out = payload["by_k"][str(K)]["outcomes"]
    for m, (_, scens, _) in METRICS.items():
        blk = out[m][STORE]
        assert set(blk) == set(scens)
        for b in blk.values():
            n = len(b["task_ids"])
            for row, per_rep in b["rows"].items():
                assert len(per_rep) == payload["repeats"] and all(len(x) == n for x in per_rep)
                assert all(v in (0, 1) for x in per_rep for v in x)


# --------------------------------------------------------------------------- the command: cfjax upliftmem controlled


def _one_line(rc: int, err: str, *needles: str) -> None:
    assert rc == 2 and err.startswith("cfjax: ") and err.count("\n") == 1 and "Traceback" not in err, (rc, err)
    for n in needles:
        assert n in err, (n, err)


def test_command_refuses_before_any_work(tmp_path, capsys):
    """A non-empty --out, a bad flag and an LLM --backbone: one line, status 2, nothing written
    (``python -m cfjax.experiments.upliftmem.controlled`` is the same command)."""
    from cfjax.cli import main
    from cfjax.experiments.upliftmem import controlled as uc

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for args, needle in ((["--out", mine], "is not empty"),
                         (["--out", tmp_path / "o", "--backbone", "openai"], "frozen scripted answerer"),
                         (["--out", tmp_path / "o", "--backbone", "hf:/models/x"], "never by an LLM"),
                         (["--out", tmp_path / "o", "--stores", "mem0", "nope"], "unknown store(s) ['nope']"),
                         (["--out", tmp_path / "o", "--repeats", "0"], "argument --repeats")):
        capsys.readouterr()
        _one_line(main(["upliftmem", "controlled", *map(str, args)]), capsys.readouterr().err, needle)
        _one_line(uc.main([str(a) for a in args]), capsys.readouterr().err, needle)
    assert [p.name for p in tmp_path.iterdir()] == ["mine"] and (mine / "notes.txt").read_text() == "mine"


def test_command_writes_the_runners_payload(payload, tmp_path, capsys, monkeypatch):
    """The command's flags reach the runner (quick config, then --set), --force keeps the user's files,
    and results.json / report.txt are the payload and its table. The runner is replaced by the module's
    quick run (it takes about half a minute)."""
    import json

    from cfjax.cli import main
    from cfjax.experiments.upliftmem import controlled as uc
    from cfjax.experiments.common import finite

    seen = []
    monkeypatch.setattr(uc, "run_controlled", lambda cfg, **kw: seen.append((cfg, kw)) or payload)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("old")
    (out / "notes.txt").write_text("mine")
    rc = main(["upliftmem", "controlled", "--quick", "--stores", STORE, "--k", "5", "--backbone", "scripted",
               "--set", "probing.budget=30", "--out", str(out), "--force"])
    assert rc == 0, capsys.readouterr().err
    cfg, kw = seen[0]
    want = controlled_config(UpliftConfig(), quick=True)
    assert cfg.probing.budget == 30 and cfg.training == want.training and cfg.eval_repeats == want.eval_repeats
    assert kw["stores"] == (STORE,) and kw["k_values"] == (K,) and kw["variants"] == ("upliftmem",) and kw["quick"]
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(finite(payload)))
    assert (out / "report.txt").read_text() == format_controlled(payload) + "\n"
    assert (out / "notes.txt").read_text() == "mine"
