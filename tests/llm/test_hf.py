"""The local transformers backbone (``--backbone hf:PATH``) and exact token counting, on a tiny
random Llama with a locally trained tokenizer (``tests/llm/tiny_hf.py``), loaded through the same
path a user's model takes."""

from __future__ import annotations

import dataclasses
import json
import pickle
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cfjax.llm import prompts  # noqa: E402
from cfjax.llm.calls import DRAFT_ACTION  # noqa: E402
from cfjax.llm.hf import HFBackbone, HFConfig, HFModelError, request_seed  # noqa: E402
from cfjax.llm.sanitize import clean_text  # noqa: E402
from cfjax.llm.tokens import hf_token_counter  # noqa: E402
from cfjax.types import DraftRequest, Task  # noqa: E402
from tests.llm.tiny_hf import build_tiny_model, with_eos  # noqa: E402

NEW = 8  # max_new_tokens of the tests: short replies keep generation cheap


def _prompts(n: int = 8) -> list[str]:
    """``n`` different prompts of different lengths (so a batch needs left padding)."""
    tasks = [Task(f"sql/hr/at_least/{i:03d}", f"List departments with at least {i + 2} employees" + " please" * i,
                  "hr", "CREATE TABLE emp(id INTEGER, dept TEXT, salary REAL);" * (1 + i % 3), {"question": "q"})
             for i in range(n)]
    return [prompts.render_draft(DraftRequest(t)) for t in tasks]


@pytest.fixture(scope="module")
def backbone(tiny_model):
    with HFBackbone(HFConfig(str(tiny_model), max_new_tokens=NEW, torch_threads=1, batch_wait_ms=200)) as b:
        yield b


@pytest.fixture(scope="module")
def reference(tiny_model):
    """The tokenizer and model loaded independently of the backbone."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, local_files_only=True, dtype=torch.float32).eval()
    return tok, model


def _greedy_ids(reference, prompt: str, max_new: int = NEW) -> tuple[list[int], list[int]]:
    """(input ids, generated ids) of one unpadded greedy generate, with no EOS stop."""
    tok, model = reference
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=True,
                                  add_generation_prompt=True)["input_ids"]
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_new,
                             do_sample=False, eos_token_id=None, pad_token_id=tok.pad_token_id)
    return list(ids), out[0, len(ids):].tolist()


class _Req:
    """A structured request carrying only a sample index (what the backbone reads of ``req``)."""

    def __init__(self, sample: int = 0) -> None:
        self.sample = sample


# --------------------------------------------------------------------------- loading and exact counts


def test_the_model_loads_from_a_save_pretrained_directory_and_counts_tokens_exactly(backbone, reference):
    tok, _ = reference
    assert backbone.uses_chat_template and backbone.name == "hf:model"
    assert not any(p.suffix == ".py" for p in Path(backbone.config.path).iterdir())  # no remote code
    p = _prompts(1)[0]
    ids, gen = _greedy_ids(reference, p)
    assert tok.eos_token_id not in gen  # the random model does not stop by itself here
    c = backbone._complete(prompts.DRAFT_ACTION, p, None)
    assert c.usage.prompt_tokens == len(ids) and c.usage.prompt_tokens != prompts.count_tokens(p)
    assert c.usage.completion_tokens == len(gen) == NEW and c.usage.failed == 0
    assert c.text == clean_text(tok.decode(gen, skip_special_tokens=True))
    counter = hf_token_counter(backbone.config.path)
    assert counter.chat_prompt(p) == len(ids) and counter(p) == len(tok(p, add_special_tokens=False)["input_ids"])
    # the draft goes through the shared renderer and parser
    d = backbone.call(DRAFT_ACTION, DraftRequest(Task("t", "q", "hr", "", {"question": "q"})))
    assert d.raw and d.usage.completion_tokens == NEW


def test_completion_tokens_stop_at_the_first_eos_of_the_generation_config(tiny_model, reference, tmp_path):
    p = _prompts(1)[0]
    _, gen = _greedy_ids(reference, p)
    j = next(i for i in range(2, len(gen)) if gen[i] not in gen[:i])  # a token that first appears at i
    d = with_eos(tiny_model, tmp_path / "eos", [gen[j], 10**6])  # several EOS ids, as chat models declare
    tok, _ = reference
    with HFBackbone(HFConfig(str(d), max_new_tokens=NEW, torch_threads=1)) as b:
        c = b._complete(prompts.DRAFT_ACTION, p, None)
        assert gen[j] in b.eos_token_ids and tok.eos_token_id in b.eos_token_ids
        assert c.usage.completion_tokens == j + 1  # up to and including the EOS
        assert c.text == clean_text(tok.decode(gen[:j], skip_special_tokens=True))
        s = b.stats()
        assert s["eos_stops"] == 1 and s["completion_tokens"] == j + 1


def test_a_tokenizer_without_chat_template_gets_the_raw_prompt_and_says_so(tmp_path):
    d = build_tiny_model(tmp_path / "raw", chat_template=False, vocab_size=400)
    with pytest.warns(UserWarning, match="no chat template"):
        b = HFBackbone(HFConfig(str(d), max_new_tokens=2, torch_threads=1))
    with b:
        p = _prompts(1)[0]
        c = b._complete(prompts.DRAFT_ACTION, p, None)
        assert c.usage.prompt_tokens == len(b.tokenizer(p)["input_ids"])
        assert not b.uses_chat_template and not b.stats()["chat_template"]
        assert b.cache_identity()["chat_template"] is False
        assert not hf_token_counter(d).has_chat_template


def test_a_too_long_prompt_is_a_failed_call_not_an_exception(tiny_model):
    with HFBackbone(HFConfig(str(tiny_model), max_new_tokens=NEW, torch_threads=1, max_prompt_tokens=20)) as b:
        r = b.call(DRAFT_ACTION, DraftRequest(Task("t", "q", "hr", "", {"question": "q"})))
        assert r.usage.failed == 1 and r.usage.total == 0 and r.raw == ""
        s = b.stats()
        assert s["too_long"] == s["failed_calls"] == s["calls"] == 1 and s["batches"] == s["ok"] == 0


def test_a_prompt_with_a_lone_surrogate_is_generated_not_refused(backbone):
    c = backbone._complete(prompts.DRAFT_ACTION, "broken \ud800 text", None)
    assert c.usage.failed == 0 and c.usage.prompt_tokens == hf_token_counter(
        backbone.config.path).chat_prompt("broken \ufffd text")
    c.text.encode("utf-8")  # the reply is valid text


# --------------------------------------------------------------------------- batching and decoding


def _concurrently(b: HFBackbone, ps: list[str], samples: list[int] | None = None) -> list:
    samples = samples or [0] * len(ps)
    gate = threading.Barrier(len(ps))

    def one(i: int):
        gate.wait()
        return b._complete(prompts.DRAFT_ACTION, ps[i], _Req(samples[i]))

    with ThreadPoolExecutor(len(ps)) as ex:
        return list(ex.map(one, range(len(ps))))


def test_batched_greedy_equals_one_at_a_time_token_for_token(backbone):
    ps = _prompts(8)
    before = backbone.stats()
    alone = [backbone._complete(prompts.DRAFT_ACTION, p, None) for p in ps]
    mid = backbone.stats()
    assert mid["batches"] - before["batches"] == 8  # one at a time
    together = _concurrently(backbone, ps)
    after = backbone.stats()
    n_batches = after["batches"] - mid["batches"]
    assert n_batches < 8  # the 8 threads were served in shared, left-padded batches
    assert together == alone
    assert len({c.usage.prompt_tokens for c in alone}) > 1  # different lengths: padding was needed
    assert after["calls"] - before["calls"] == 16
    assert after["prompt_tokens"] - before["prompt_tokens"] == 2 * sum(c.usage.prompt_tokens for c in alone)
    assert after["completion_tokens"] - before["completion_tokens"] == 2 * sum(
        c.usage.completion_tokens for c in alone)
    assert after["generate_s"] > 0 and after["mean_batch"] > 1
    assert after["ok"] == after["batched_requests"] == after["calls"] and after["failed_calls"] == 0


def test_seeded_sampling_is_reproducible_batch_invariant_and_seed_dependent(tiny_model):
    ps = _prompts(4)
    cfg = HFConfig(str(tiny_model), temperature=1.0, top_p=0.95, seed=1, max_new_tokens=NEW, torch_threads=1,
                   batch_wait_ms=200)
    with HFBackbone(cfg) as b:
        alone = [b._complete(prompts.DRAFT_ACTION, p, _Req()) for p in ps]
        again = _concurrently(b, ps)
        samples = [b._complete(prompts.DRAFT_ACTION, ps[0], _Req(k)) for k in (1, 2)]
        greedy_text = [c.text for c in _concurrently(b, ps)]
        assert b.stats()["mean_batch"] > 1
    assert again == alone  # same seed, other batch composition: the same draws
    assert len({alone[0].text, samples[0].text, samples[1].text}) == 3  # sample indices differ
    with HFBackbone(dataclasses.replace(cfg, seed=2)) as b2:
        other = [b2._complete(prompts.DRAFT_ACTION, p, _Req()) for p in ps]
    assert [c.text for c in other] != [c.text for c in alone]
    assert greedy_text == [c.text for c in alone]
    assert request_seed(1, ps[0], 0) != request_seed(2, ps[0], 0) != request_seed(2, ps[0], 1)


# --------------------------------------------------------------------------- config, errors, lifecycle


def test_config_is_frozen_picklable_and_validated(tiny_model, tmp_path):
    cfg = HFConfig(str(tiny_model))
    assert pickle.loads(pickle.dumps(cfg)) == cfg and dataclasses.replace(cfg, seed=3).seed == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 1  # type: ignore[misc]
    rel = HFConfig(Path(tiny_model))
    assert rel.path == str(Path(tiny_model).resolve())
    for bad, match in [({"temperature": -0.1}, "temperature"), ({"top_p": 0.0}, "top_p"),
                       ({"max_new_tokens": 0}, "max_new_tokens"), ({"batch_size": 0}, "batch_size"),
                       ({"batch_wait_ms": float("nan")}, "batch_wait_ms"), ({"dtype": "int8"}, "dtype"),
                       ({"torch_threads": 0}, "torch_threads"), ({"max_prompt_tokens": 0}, "max_prompt_tokens"),
                       ({"seed": -1}, "seed"), ({"device": "gpu"}, "device")]:
        with pytest.raises(ValueError, match=match):
            HFConfig(str(tiny_model), **bad)


@pytest.fixture
def no_network(monkeypatch):
    """Every attempt to open a network connection fails the test."""
    attempts = []

    def refuse(*a, **k):
        attempts.append(a)
        raise AssertionError(f"a network connection was attempted: {a}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    yield attempts
    assert not attempts


def test_missing_or_incomplete_model_directories_fail_clearly_without_network(tiny_model, tmp_path, no_network):
    with pytest.raises(HFModelError, match="does not exist.*never downloads"):
        HFConfig("Qwen/Qwen2.5-0.5B-Instruct")  # a hub id is not a local directory
    with pytest.raises(HFModelError, match="does not exist"):
        HFConfig(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(HFModelError, match="is not a directory"):
        HFConfig(str(tmp_path / "file"))
    d = tmp_path / "partial"
    d.mkdir()
    with pytest.raises(HFModelError, match="no config.json"):
        HFConfig(str(d))
    (d / "config.json").write_text((tiny_model / "config.json").read_text())
    with pytest.raises(HFModelError, match="no tokenizer files"):
        HFConfig(str(d))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (d / f).write_text((tiny_model / f).read_text())
    with pytest.raises(HFModelError, match="no weight files"):
        HFConfig(str(d))
    (d / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(HFModelError, match="does not load"):
        HFBackbone(HFConfig(str(d), torch_threads=1))
    with pytest.raises(HFModelError, match="does not exist"):
        hf_token_counter(tmp_path / "missing")
    assert hf_token_counter(d)("SELECT 1") > 0  # a tokenizer alone is enough to count


def test_cache_identity_names_everything_that_determines_the_reply(tiny_model, tmp_path, backbone):
    ident = backbone.cache_identity()
    assert json.loads(json.dumps(ident)) == ident
    assert ident["backend"] == "hf" and ident["model"] == backbone.config.path
    assert ident["seed"] is None and ident["temperature"] == 0.0 and ident["max_new_tokens"] == NEW
    d = with_eos(tiny_model, tmp_path / "copy", 2)
    with HFBackbone(HFConfig(str(d), max_new_tokens=NEW, torch_threads=1)) as b:
        same = b.cache_identity()
        assert same["model_sha256"] != ident["model_sha256"]  # generation_config.json was rewritten
    with HFBackbone(HFConfig(str(tiny_model), max_new_tokens=NEW, torch_threads=1, temperature=0.7, seed=5)) as b:
        s = b.cache_identity()
        assert s["model_sha256"] == ident["model_sha256"] and s["seed"] == 5 and s["temperature"] == 0.7


def test_the_response_cache_serves_a_repeated_greedy_prompt(tiny_model, tmp_path):
    from cfjax.llm.cache import ResponseCache

    req = DraftRequest(Task("t", "q", "hr", "", {"question": "q"}))
    with HFBackbone(HFConfig(str(tiny_model), max_new_tokens=NEW, torch_threads=1)) as b:
        b.cache = ResponseCache(tmp_path / "responses.sqlite")
        first, second = b.call(DRAFT_ACTION, req), b.call(DRAFT_ACTION, req)
        assert b.stats()["calls"] == 1  # the second reply came from the cache
        assert second == first and second.usage.prompt_tokens > 0  # with the original, exact usage


def test_close_stops_the_daemon_batcher_and_later_calls_raise(tiny_model):
    b = HFBackbone(HFConfig(str(tiny_model), max_new_tokens=2, torch_threads=1))
    t = b._batcher.thread
    assert t.daemon and t.is_alive()
    b._complete(prompts.DRAFT_ACTION, "hello", None)
    b.close()
    assert not t.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        b._complete(prompts.DRAFT_ACTION, "hello", None)
    b.close()  # idempotent


def test_token_counter_is_exact_and_thread_safe(tiny_model, reference):
    tok, _ = reference
    count = hf_token_counter(tiny_model)
    texts = _prompts(8) * 4
    want = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    with ThreadPoolExecutor(8) as ex:
        assert list(ex.map(count, texts)) == want
    assert count("a \ud800 b") == count("a \ufffd b")  # a lone surrogate does not break counting
    with pytest.raises(TypeError):
        count(b"bytes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the main job end to end


def test_the_main_job_runs_end_to_end_on_the_local_model(tiny_model, tmp_path, monkeypatch):
    """``run_main`` with the hf backbone: results are written, every row has a success figure, and
    each row's ledger tokens are the sum of the exact tokenizer counts of its calls."""
    from cfjax.config import CounterMemConfig, quick
    from cfjax.experiments.countermem import runner as cm

    cfg = quick(CounterMemConfig())
    cfg = dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, total_decisions=8, checkpoint_every=4),
                              experiment=dataclasses.replace(cfg.experiment, accumulation_checkpoints=(0, 2)))
    phase = threading.local()  # the row whose held-out episode runs on this thread (rows run concurrently)
    calls: list[tuple[str, str, object]] = []
    lock = threading.Lock()
    run_rows, complete = cm.UnitContext.run_rows, HFBackbone._complete

    def tagged_rows(self, name, fn, *a, **k):
        def tagged(*args):
            phase.row = name
            try:
                return fn(*args)
            finally:
                phase.row = None
        return run_rows(self, name, tagged, *a, **k)

    def recorded(self, kind, prompt, req):
        c = complete(self, kind, prompt, req)
        with lock:
            calls.append((getattr(phase, "row", None) or "build", prompt, c.usage))
        return c

    monkeypatch.setattr(cm.UnitContext, "run_rows", tagged_rows)
    monkeypatch.setattr(HFBackbone, "_complete", recorded)
    spec = cm.BackboneSpec("hf", hf=HFConfig(str(tiny_model), max_new_tokens=NEW, torch_threads=1), cache_path=None)
    out = tmp_path / "run"
    cm.run_main(cfg, suites=["sql"], out=out, rows=["none"], backbone=spec, workers=1, threads=4, max_tasks=2,
                progress=False, log=lambda s: None)

    res = json.loads((out / "results.json").read_text())
    assert res["backbone"] == f"local transformers model {tiny_model}"
    rows = res["units"][0]["rows"]
    assert set(rows) >= {"none", "cf_memory"}
    assert all(isinstance(m["success"], (int, float)) and 0 <= m["success"] <= 100 for m in rows.values())
    counter = hf_token_counter(tiny_model)
    assert calls and all(u.prompt_tokens == counter.chat_prompt(p) and 1 <= u.completion_tokens <= NEW
                         for _, p, u in calls)
    for name in ("none", "cf_memory"):
        mine = [u for ph, _, u in calls if ph == name]
        assert mine and rows[name]["tokens"] == sum(u.total for u in mine)
