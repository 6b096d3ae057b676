"""A whole run against a faulty loopback server, and a cached rerun.

The server injects every fault kind of :data:`llm_server.FAULT_KINDS` (empty ``choices``, non-JSON
bodies, null content, lone surrogates, 429 with ``Retry-After``, 500 bursts, connection resets,
stalls, huge replies) at 5%: the run must finish, and ``results.json`` and ``report.txt`` must count
every fault. Stalls and ``Retry-After`` are short here (the benchmark uses the real 2–5 s).
Concurrent rows equal to the serial run: ``test_experiment.py`` (scripted and through the client).
"""

from __future__ import annotations

import json

import pytest

from llm_server import FakeLLMServer, FaultPlan, canned_sql

from cfjax.config import CounterMemConfig, quick
from cfjax.experiments.countermem.runner import BackboneSpec, run_main
from cfjax.llm.openai_client import OpenAIConfig

ROWS = ("none", "cf_memory", "best_of_n")


def _spec(srv: FakeLLMServer, *, inflight: int = 8, cache: str | None = None) -> BackboneSpec:
    cfg = OpenAIConfig(base_url=srv.base_url, model=srv.model, max_inflight=inflight, backoff_s=0.01,
                       max_retries=6, timeout_s=5.0)
    return BackboneSpec("openai", cfg, cache_path=cache, inflight=inflight)


def _run(tmp_path, name: str, spec: BackboneSpec) -> dict:
    cfg = quick(CounterMemConfig())
    return run_main(cfg, suites=["sql"], out=tmp_path / name, rows=ROWS, backbone=spec, workers=1,
                    max_tasks=6, progress=False, log=lambda s: None)


@pytest.fixture(scope="module")
def sql_suite(tmp_path_factory):
    from cfjax.domains import build_suite

    return build_suite("sql", tmp_path_factory.mktemp("suite") / "sql")


@pytest.mark.slow
def test_a_run_against_a_server_with_5pct_faults_finishes_and_counts_every_fault(tmp_path, sql_suite):
    plan = FaultPlan(rate=0.05, seed=3, retry_after_s=0.05, stall_s=(0.05, 0.2), huge_chars=1 << 18)
    with FakeLLMServer(canned_sql(sql_suite), faults=plan) as srv:
        res = _run(tmp_path, "faulty", _spec(srv))
        injected = dict(srv.faults_injected)
    llm = res["llm"]
    assert sum(injected.values()) >= 10, injected  # enough faults to mean something
    faults = llm["faults"]
    # every fault the server injected is in the client's counts (a 500 burst is `burst` 500s)
    assert faults["http_429"] == injected.get("http_429", 0)
    assert faults["reset"] == injected.get("reset", 0)
    for kind in ("empty_choices", "not_json", "null_content"):
        assert faults[kind] == injected.get(kind, 0), kind
    assert faults["http_5xx"] >= injected.get("http_500_burst", 0)
    assert llm["sanitised"] >= injected.get("surrogate", 0)
    assert llm["calls"] == llm["ok"] + llm["failed_calls"] + llm.get("cached", 0)
    # results.json and the report carry them
    saved = json.loads((tmp_path / "faulty" / "results.json").read_text())
    assert saved["llm"]["faults"] == faults
    report = (tmp_path / "faulty" / "report.txt").read_text()
    assert "LLM transport" in report and "faults:" in report
    # every row has its figure and its failed-call count
    for row in ROWS:
        unit = saved["units"][0]["rows"][row]
        assert unit["success"] is not None and "llm_failed" in unit, row


@pytest.mark.slow
def test_a_rerun_with_the_cache_makes_no_new_calls_and_changes_nothing(tmp_path, sql_suite):
    cache = str(tmp_path / "responses.sqlite")
    with FakeLLMServer(canned_sql(sql_suite)) as srv:
        first = _run(tmp_path, "first", _spec(srv, cache=cache))
        sent_first = len(srv.chat_requests)
        second = _run(tmp_path, "second", _spec(srv, cache=cache))
        sent_second = len(srv.chat_requests) - sent_first
    # identical prompts within the first run (a temperature-0 draft the rows share, Best-of-N's
    # drafts) were asked once; the rerun asks nothing
    assert 0 < sent_first < first["llm"]["calls"]
    assert sent_second == 0
    assert second["outcomes"] == first["outcomes"]
    assert second["llm"]["cache"]["hits"] == second["llm"]["calls"] > 0
    assert second["llm"]["cache"]["hit_rate"] == 1.0
    # costs are the method's, not the cache's: the ledger charges a hit the original tokens
    tok = lambda r: [u["rows"]["none"]["tokens"] for u in r["units"]]  # noqa: E731
    assert tok(first) == tok(second)
