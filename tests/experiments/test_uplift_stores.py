"""The store swap (cfjax.experiments.upliftmem.stores): a quick run on sql with CounterMem's frozen store,
Anti-Persistence's trajectory store and pipeline-built peer stores (Mem0, MemGPT, A-MEM; every one of the
five is built and exported below). Checks the protocol — the store and the executor are identical for
every retriever, the native row is similarity top-K of the recall, the own-native row is the system's
own retrieval, every memory is what the store held, no answer key is read — and the intervals' shape;
never the direction of the result."""

from __future__ import annotations

import json

import pytest

from cfjax.antipersist.guidance import Attempt, Rule, Trajectory, factual_rules, render_factual
from cfjax.config import UpliftConfig
from cfjax.domains import open_suite
from cfjax.experiments.countermem.runner import BackboneSpec
from cfjax.experiments.upliftmem.runner import quick_config, splits_for
from cfjax.experiments.upliftmem.stores import (LABEL, OWN, PEER_STORES, ROWS, build_peer, format_store_swap,
                                                peer_memories, run_store_swap)
from cfjax.infra.ledger import Ledger
from cfjax.llm import prompts
from cfjax.types import answer_key_guard
from cfjax.uplift import AgentExecutor, Memory, MemoryPool
from cfjax.uplift.retrieval import native_topk

SUITE = "sql"
#: the stores the module's quick run trains on (lightmem and naive_rag: built and exported below)
STORES = ("countermem", "antipersist", "mem0", "memgpt", "amem")


@pytest.fixture(scope="module")
def swap(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    with answer_key_guard():  # any agent-side read of an answer key fails the run
        payload = run_store_swap(UpliftConfig(), suites=(SUITE,), stores=STORES, quick=True, log=lambda s: None,
                                 n_boot=300, root=root)
    suite = open_suite(SUITE, root / SUITE)
    return payload, suite


def test_protocol_checks_and_intervals(swap):
    payload, _ = swap
    json.dumps(payload)  # plain data
    blk = payload["by_suite"][SUITE]
    assert blk["checks"] == {"no_memory_identical_across_stores": True}
    assert set(blk["stores"]) == set(STORES)
    for store, r in blk["stores"].items():
        assert all(r["checks"].values()), (store, r["checks"])
        assert r["store"]["frozen"] and len(r["memories"]) > 0
        for row in ROWS:
            iv = r["table"][row]["success"]
            assert 0.0 <= iv["lo"] <= iv["mean"] <= iv["hi"] <= 100.0, (store, row, iv)
        d = r["delta"]
        assert d["lo"] <= d["mean"] <= d["hi"]
        assert d["mean"] == pytest.approx(r["table"]["upliftmem"]["success"]["mean"]
                                          - r["table"]["similarity_topk"]["success"]["mean"])
        assert r["mean_set_size"]["no_memory"] == 0 and 0 < r["mean_set_size"]["similarity_topk"] <= blk["k"]
        if store in PEER_STORES:  # the system's own retrieval, on the same executor and draft seeds
            own = r["table"][OWN]["success"]
            assert 0.0 <= own["lo"] <= own["mean"] <= own["hi"] <= 100.0
            assert r["delta_own"]["mean"] == pytest.approx(r["table"]["upliftmem"]["success"]["mean"] - own["mean"])
            ids = {m["mem_id"] for m in r["memories"]}
            assert all(len(x) <= blk["k"] and set(x) <= ids for rep in r["sets"][OWN] for x in rep)
            assert r["store"]["build_cost"]["llm_calls"] > 0  # its own pipeline's calls
    text = format_store_swap(payload)
    assert LABEL in text and "countermem" in text and "antipersist" in text and "own native" in text


def test_store_and_executor_identical_for_both_retrievers(swap):
    payload, suite = swap
    cfg = quick_config(UpliftConfig())
    blk = payload["by_suite"][SUITE]
    tasks = list(splits_for(suite, cfg).eval)
    assert [t.task_id for t in tasks] == blk["split"]["eval_task_ids"]
    k = blk["k"]
    for store, r in blk["stores"].items():
        mems = [Memory(m["mem_id"], m["text"], m["tokens"]) for m in r["memories"]]
        pool = MemoryPool(cfg.retrieval.embed_dim)
        for m in mems:
            pool.add(m)
        rows = r["outcomes"][SUITE][str(cfg.split_seed)]["rows"]
        for t_i, t in enumerate(tasks):
            recalled, _ = pool.recall(t, cfg.retrieval.recall)
            # both retrievers were offered the pool's own recall of the fixed store
            assert r["offered"][t.task_id] == [m.mem_id for m in recalled], (store, t.task_id)
            native = sorted(m.mem_id for m in native_topk(recalled, k, cfg.retrieval.token_budget))
            for rep in range(payload["repeats"]):
                assert r["sets"]["similarity_topk"][rep][t_i] == native
                s = r["sets"]["upliftmem"][rep][t_i]
                assert len(s) <= k and set(s) <= set(r["offered"][t.task_id])
                assert r["sets"]["no_memory"][rep][t_i] == []
        assert {row for row in rows} == set(ROWS) | ({OWN} if store in PEER_STORES else set())
    # the no-memory executions are the same for both stores, and a fresh executor reproduces them
    nm = [blk["stores"][s]["outcomes"][SUITE][str(cfg.split_seed)]["rows"]["no_memory"] for s in STORES]
    assert all(x == nm[0] for x in nm)
    world = suite.world()
    try:
        ex = AgentExecutor(BackboneSpec("scripted").make(suite, cfg.backbone_seed, cfg), world, suite.edits,
                           max_attempts=cfg.training.max_attempts)
        for rep, seed in enumerate(payload["eval_seeds"]):
            with answer_key_guard():
                fresh = [int(ex.execute(t, [], seed=seed, ledger=Ledger("t")).solved) for t in tasks]
            assert fresh == nm[0][rep]
    finally:
        world.close()


def test_every_memory_is_what_the_store_held(swap):
    payload, suite = swap
    blk = payload["by_suite"][SUITE]
    cm = blk["stores"]["countermem"]
    assert [e["mem_id"] for e in cm["entries"]] == [m["mem_id"] for m in cm["memories"]]
    for e, m in zip(cm["entries"], cm["memories"]):
        rec = e["record"]
        assert m["mem_id"] == f"cm{rec['record_id']}"
        assert m["text"] == prompts.render_record(rec["situation"], rec["unit_before"], rec["unit_after"],
                                                  rec["original"], rec["improved"], rec["evidence"], rec["condition"])
        assert prompts.parse_edit_line(m["text"]) == (rec["unit_before"], rec["unit_after"])
        assert not prompts.parse_rule_lines(m["text"])  # a record: no RULE lines, only its EDIT
        assert m["tokens"] == prompts.count_tokens(m["text"])
    ap = blk["stores"]["antipersist"]
    assert [e["mem_id"] for e in ap["entries"]] == [f"tr{i}" for i in range(len(ap["entries"]))]
    assert len(ap["entries"]) == blk["split"]["n_build"]  # one trajectory per build task
    for i, (e, m) in enumerate(zip(ap["entries"], ap["memories"])):
        d = dict(e["trajectory"])
        t = Trajectory(**{**d, "cues": tuple(d["cues"]), "parents": tuple(d["parents"]),
                          "parent_flagged": tuple(d["parent_flagged"]),
                          "attempts": tuple(Attempt(**{**a, "applied": tuple(a["applied"])}) for a in d["attempts"]),
                          "rules_in_context": tuple(Rule(**x) for x in d["rules_in_context"])})
        assert m["text"] == render_factual([t], factual_rules([t], suite.edits, prefix=f"tr{i}", max_rules=4))
        assert t.question in m["text"]
        notes = [s for s in prompts.parse_rule_sections(m["text"])]
        assert all(noted for *_, noted in notes)  # every pattern sits under the factual-notes header
        if notes:
            assert prompts.FACTUAL_NOTES_HEADER in m["text"]


# --------------------------------------------------------------------------- the command: cfjax upliftmem stores


def test_command_quick_run_gives_the_runners_numbers(swap, tmp_path, capsys):
    """``cfjax upliftmem stores --quick`` is the fixture's run (same stores, sets, outcomes and point
    estimates; only the bootstrap resamples differ: 300 in the fixture, 2000 here) and writes its table."""
    from cfjax.cli import main
    from cfjax.experiments.upliftmem.stores import format_store_swap as fmt

    payload, _ = swap
    out = tmp_path / "out"
    rc = main(["upliftmem", "stores", "--quick", "--suite", SUITE, "--out", str(out), "--stores", "countermem", "mem0"])
    assert rc == 0, capsys.readouterr().err
    got = json.loads((out / "results.json").read_text())
    assert (out / "suites" / SUITE).is_dir() and "native" in (out / "report.txt").read_text()
    assert got["label"] == payload["label"] == LABEL and got["quick"] is True
    assert got["config"] == payload["config"] and got["repeats"] == payload["repeats"]
    assert set(got["by_suite"][SUITE]["stores"]) == {"countermem", "mem0"}
    for store, want in payload["by_suite"][SUITE]["stores"].items():
        if store not in ("countermem", "mem0"):
            continue
        r = got["by_suite"][SUITE]["stores"][store]
        for key in ("outcomes", "rewards", "sets", "offered", "memories", "mean_set_size", "checks"):
            assert r[key] == json.loads(json.dumps(want[key])), (store, key)
        assert r["delta"]["mean"] == pytest.approx(want["delta"]["mean"])
        for row in ROWS:
            assert r["table"][row]["success"]["mean"] == pytest.approx(want["table"][row]["success"]["mean"])
    assert fmt(got).splitlines()[0] == format_store_swap(payload).splitlines()[0]


def test_command_refuses_and_takes_the_backbone(tmp_path, capsys, monkeypatch):
    """A non-empty --out and bad values: one line, status 2, nothing written; ``--backbone`` (and its
    flags) reach the runner as the spec that builds the stores and executes."""
    from cfjax.cli import main
    from cfjax.experiments.upliftmem import stores as us

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for args, needle in ((["--out", mine], "is not empty"), (["--out", tmp_path / "o", "--suite", "nope"], "unknown suite"),
                         (["--out", tmp_path / "o", "--max-tasks", "-1"], "argument --max-tasks"),
                         (["--out", tmp_path / "o", "--backbone", "gpt"], "argument --backbone: 'gpt'")):
        capsys.readouterr()
        rc = us.main([str(a) for a in args])  # python -m cfjax.experiments.upliftmem.stores = the command
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("cfjax: ") and err.count("\n") == 1 and needle in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]
    seen = []

    def fake(cfg, **kw):
        seen.append((cfg, kw))
        return {"label": kw["backbone"].label, "by_suite": {}, "summary": None, "repeats": 1,
                "config": {"max_tasks": cfg.max_tasks}}

    monkeypatch.setattr(us, "run_store_swap", fake)
    rc = main(["upliftmem", "stores", "--suite", "sql,pybugs", "--out", str(tmp_path / "llm"), "--backbone", "openai",
               "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--no-cache", "--max-tasks", "8",
               "--allow-weak-sandbox"])
    assert rc == 0, capsys.readouterr().err
    cfg, kw = seen[0]
    assert kw["backbone"].kind == "openai" and "LLM m at http://127.0.0.1:9/v1" == kw["backbone"].label
    assert kw["suites"] == ["sql", "pybugs"] and cfg.max_tasks == 8 and kw["root"] == tmp_path / "llm" / "suites"
    assert json.loads((tmp_path / "llm" / "results.json").read_text())["label"] == kw["backbone"].label


def test_every_pipeline_built_store_exports_what_it_shows_and_retrieves_natively(tmp_path):
    """The five stores of the fixed-store protocol, each built by its own system's pipeline and frozen:
    the pool's memories are the system's items (ids and texts as its recall shows them), and its own
    retrieval returns at most k of them, never the task's own."""
    from cfjax.domains import build_suite
    from cfjax.experiments.worlds import close_worlds, open_world
    from cfjax.memory import RecallQuery

    cfg = quick_config(UpliftConfig())
    build_suite(SUITE, tmp_path / SUITE)
    try:
        suite, _, world = open_world(SUITE, str(tmp_path / SUITE))
        sp = splits_for(suite, cfg)
        for name in PEER_STORES:
            with answer_key_guard():
                system, led = build_peer(name, suite, world, list(sp.build)[:8], seed=0, max_attempts=2)
                mems = peer_memories(name, system)
                assert system.frozen and mems, name
                assert [(m.mem_id, m.text) for m in mems] == system.export_items()
                ids = {m.mem_id for m in mems}
                for t in list(sp.eval)[:4]:
                    for k in (3, 5, 10):
                        got = system.native(RecallQuery(t, (), None, 0, 0), k)
                        assert len(got) <= k and set(got) <= ids, (name, k)
            assert led.total.eval_calls > 0, name  # built from evaluated episodes
    finally:
        close_worlds()
