"""UpliftMem's invariants checked *through the pipeline* (papers/upliftmem.md; SPEC.md §2).

One small run on the SQL suite (module fixture ``shared``: 16 build tasks, 16 training tasks, one
epoch, two policy batches, two probing windows of 20 probes) is built once with the executor, the
writer's backbone, ``ScorerTrainer.update`` and ``Retriever.sample`` wrapped to record what the
pipeline does; every test reads that run. Tests that need another writer use their own tiny run.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest

from cfjax.config import ScriptedConfig
from cfjax.config.uplift import ProbingSection, TrainingSection, UpliftConfig
from cfjax.infra.ledger import Ledger
from cfjax.llm.scripted import ScriptedBackbone
from cfjax.types import Usage
from cfjax.uplift import AgentExecutor, UpliftRun, TrainingRow, set_key, utility
from cfjax.uplift.calls import REVISE_MEMORY, WRITE_MEMORY, MemoryResult
from cfjax.uplift.probing import _dense_groups

K = 5
UPDATE_EVERY = 8


class CountingExecutor:
    """The frozen executor, counting how often it really runs."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    def execute(self, task, memories, *, seed, ledger):
        self.calls += 1
        return self.inner.execute(task, memories, seed=seed, ledger=ledger)


class CountingWriterBackbone:
    """The writer's backbone, counting WRITE_MEMORY and REVISE_MEMORY calls."""

    def __init__(self, inner) -> None:
        self.inner, self.writes, self.revisions = inner, 0, 0

    def call(self, kind, req):
        if kind is WRITE_MEMORY:
            self.writes += 1
        elif kind is REVISE_MEMORY:
            self.revisions += 1
        return self.inner.call(kind, req)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class UselessWriter:
    """A writer whose every version is a memory the executor cannot use (no RULE/FIX line)."""

    def __init__(self) -> None:
        self.calls = 0

    def _result(self, text: str) -> MemoryResult:
        self.calls += 1
        return MemoryResult(text, Usage(10, 10), text)

    def call(self, kind, req):
        if kind is WRITE_MEMORY:
            return self._result(f"Note: read the question about {req.task.task_id} carefully.")
        if kind is REVISE_MEMORY:
            return self._result(f"Note (revision {req.revision}): read the question carefully.")
        raise NotImplementedError(f"UselessWriter only writes and revises memories, not {kind.name}")


def small_config() -> UpliftConfig:
    return UpliftConfig(training=TrainingSection(epochs=1, warmup_steps=16, steps_per_update=4,
                                                 update_every=UPDATE_EVERY),
                        probing=ProbingSection(budget=20, max_pool=256, max_comparisons=256))


@pytest.fixture(scope="module")
def shared(suite, world):
    cfg = small_config()
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=42))
    executor = CountingExecutor(AgentExecutor(bb, world, suite.edits, max_attempts=2))
    writer_bb = CountingWriterBackbone(bb)
    run = UpliftRun(cfg, executor, domain="sql", k_max=K, writer_backbone=writer_bb)
    sp = suite.splits()
    build, train = list(sp.build)[:16], list(sp.train)[:16]

    phase = {"name": "bootstrap"}
    events: list[tuple] = []
    update, sample = run.trainer.update, run.retriever.sample

    def recording_update(labels, rng, *, steps, paths=(), w_value=1.0, w_policy=0.0):
        events.append(("update", phase["name"], list(paths), w_value, w_policy))
        return update(labels, rng, steps=steps, paths=paths, w_value=w_value, w_policy=w_policy)

    def recording_sample(cands, key):
        res = sample(cands, key)
        events.append(("sample", phase["name"], [c.task.task_id for c in cands], [c.ctx for c in cands], res))
        return res

    run.trainer.update, run.retriever.sample = recording_update, recording_sample
    windows = []
    run.bootstrap(build)
    phase["name"] = "warmup"
    run.warmup()
    phase["name"] = "train"
    run.train(train, on_window=lambda win, picks, labels: windows.append((win, picks, labels)))
    phase["name"] = "after"
    return SimpleNamespace(run=run, cfg=cfg, executor=executor, writer_bb=writer_bb, events=events,
                           windows=windows, tasks={t.task_id: t for t in build + train}, train=train,
                           eval=list(sp.eval)[:8], calls_after_train=executor.calls, backbone=bb)


# ---------------------------------------------------------------------------------------- labels
def test_labels_are_paired_with_the_logged_no_memory_run(shared):
    run = shared.run
    log = run.labeler.log
    spec = shared.cfg.utility.get("sql")
    assert spec.cost == "attempts"
    labels = run.labels.labels
    kinds = Counter(lab.kind for lab in labels)
    assert {"bootstrap", "retrieved", "probe", "writing"} <= set(kinds), kinds
    assert any(lab.y != 0 for lab in labels)
    for lab in labels:
        assert lab.members and lab.members == tuple(sorted(lab.members))
        # the reference: the no-memory execution of the same task and draft seed
        assert log.keys[lab.ref_id] == (lab.task_id, (), lab.seed)
        assert log.purpose[lab.ref_id] == "reference"
        i = log.index[(lab.task_id, lab.members, lab.seed)]
        ex_s, ex_0 = log.runs[i], log.runs[lab.ref_id]
        assert ex_0.memory_tokens == 0 and ex_s.memory_tokens > 0
        u_s = utility(ex_s.R, float(ex_s.attempts), spec)
        u_0 = utility(ex_0.R, float(ex_0.attempts), spec)
        assert lab.u_set == pytest.approx(u_s, abs=1e-12) and lab.u_ref == pytest.approx(u_0, abs=1e-12)
        assert lab.y == pytest.approx(u_s - u_0, abs=1e-12)


def test_shared_references_share_noise(shared):
    labels = shared.run.labels.labels
    refs = defaultdict(set)
    for lab in labels:
        refs[(lab.task_id, lab.seed)].add(lab.ref_id)
    assert all(len(v) == 1 for v in refs.values()), "one reference per (task, seed)"
    ids = [next(iter(v)) for v in refs.values()]
    assert len(set(ids)) == len(ids), "different (task, seed) never share a reference"
    assert max(Counter((lab.task_id, lab.seed) for lab in labels).values()) >= 2  # something is actually shared

    assert len(shared.windows) == 2
    for win, picks, probe_labels in shared.windows:
        group = np.asarray(win.inputs.group)
        n = len(win.sets)
        assert (group[n:] == -1).all() and (group[:n] >= 0).all()
        by_task = defaultdict(set)
        for q, (ti, _) in enumerate(win.sets):
            by_task[win.tasks[ti].cands.task.task_id].add(int(group[q]))
        assert all(len(g) == 1 for g in by_task.values()), "one group per task"
        flat = [next(iter(g)) for g in by_task.values()]
        assert len(set(flat)) == len(flat), "different tasks, different groups"
        assert len(by_task) >= 2
        ref_groups = _dense_groups(np.array([win.tasks[ti].ref_id for ti, _ in win.sets], np.int32))
        assert (group[:n] == ref_groups).all(), "the group is the task's reference execution"
        # the probes pair with the reference of their task's retrieved execution
        for (ti, members), lab in zip(picks, probe_labels):
            wt = win.tasks[ti]
            assert (lab.task_id, lab.members, lab.seed, lab.ref_id, lab.kind) == (
                wt.cands.task.task_id, set_key(members), wt.seed, wt.ref_id, "probe")


# ---------------------------------------------------------------------------------------- accounting
def test_every_execution_is_counted_once(shared):
    run, ex = shared.run, shared.executor
    log = run.labeler.log
    assert len(set(log.keys)) == len(log.keys) == len(log.runs) == len(log.purpose)
    assert log.index == {k: i for i, k in enumerate(log.keys)}
    assert shared.calls_after_train == len(log.runs), "the executor ran exactly the logged executions"
    c = run.counts()
    assert c["reused"] > 0  # executions were requested again (shared references) and read back
    assert run.ledger.total.eval_calls == sum(r.eval_calls for r in log.runs) == c["eval_calls"]
    writer_calls = shared.writer_bb.writes + shared.writer_bb.revisions
    assert shared.writer_bb.revisions > 0
    assert run.ledger.total.llm_calls == sum(r.llm_calls for r in log.runs) + writer_calls
    assert c["ledger_llm_calls"] == c["llm_calls"] + writer_calls

    # re-requesting logged executions reads them back: no executor call, no new entry, no new cost
    before = (ex.calls, len(log.runs), run.ledger.total.llm_calls, run.ledger.total.eval_calls)
    reused = sum(log.reuses.values())
    lab = next(lab for lab in run.labels.labels if lab.kind == "probe")
    task, mems = shared.tasks[lab.task_id], [run.pool.get(m) for m in lab.members]
    i, exe = run.labeler.run(task, mems, seed=lab.seed, purpose="probe")
    assert i == log.index[(lab.task_id, lab.members, lab.seed)] and exe is log.runs[i]
    again, _ = run.labeler.label(task, mems, seed=lab.seed, kind="probe")
    assert again == lab
    assert (ex.calls, len(log.runs), run.ledger.total.llm_calls, run.ledger.total.eval_calls) == before
    assert sum(log.reuses.values()) == reused + 3  # the set twice, its reference once


# ---------------------------------------------------------------------------------------- writing
def test_writing_labels_enter_the_store_admitted_or_not(shared):
    run = shared.run
    log = run.labeler.log
    admitted = {m.mem_id for m in run.pool}
    writing = [lab for lab in run.labels.labels if lab.kind == "writing"]
    logged = {k for k, p in zip(log.keys, log.purpose) if p == "writing"}
    assert {(lab.task_id, lab.members, lab.seed) for lab in writing} == logged, "every validated version is a label"
    for lab in writing:
        assert len(lab.members) == 1
        assert (lab.members[0] in admitted) == (lab.y > run.cfg.training.tau_accept)
    assert any(lab.members[0] not in admitted for lab in writing), "the run has rejected versions"


def test_rejected_versions_still_yield_labels(suite, world):
    cfg = small_config()
    bb = ScriptedBackbone(suite.scripted_domain(), ScriptedConfig(seed=42))
    executor = AgentExecutor(bb, world, suite.edits, max_attempts=2)
    stub = UselessWriter()
    run = UpliftRun(cfg, executor, domain="sql", k_max=K, writer_backbone=stub,
                    row=TrainingRow("plain", warmup=False, online=False, probing=None))
    tasks = list(suite.splits().train)[:2]
    versions = cfg.training.revisions + 1

    # the writer alone: every version is validated, labelled, and none is admitted
    out = run.writer.write(tasks[0], (), False, seed=7, ledger=Ledger("t"))
    assert len(out.labels) == len(out.versions) == len(out.uplifts) == versions
    assert out.admitted is None and all(u <= 0 for u in out.uplifts)
    assert [lab.kind for lab in out.labels] == ["writing"] * versions
    assert len({lab.members for lab in out.labels}) == versions

    # through the pipeline: the training stream puts every rejected version in the LabelStore
    n0 = len(run.labels)
    run.train(tasks)
    new = run.labels.labels[n0:]
    assert len(new) == len(tasks) * versions
    assert all(lab.kind == "writing" and lab.y == 0.0 for lab in new)
    assert {lab.task_id for lab in new} == {t.task_id for t in tasks}
    assert len(run.pool) == 0 and run.train_log.admitted == 0 and run.train_log.written == len(tasks)
    for lab in new:
        assert run.pool.get(lab.members[0]).text.startswith("Note")  # registered, never admitted


# ---------------------------------------------------------------------------------------- policy
def test_policy_updates_use_only_the_latest_batch(shared):
    events = shared.events
    warm = [e for e in events if e[0] == "update" and e[1] == "warmup"]
    assert warm and all(e[2] == [] and e[4] == 0.0 for e in warm), "the warm-up is value-only"
    train = [e for e in events if e[1] == "train"]
    samples = [e for e in train if e[0] == "sample"]
    assert len(samples) == 2  # 16 tasks, update_every = 8
    seen_tasks: set = set()
    for e in samples:
        assert not seen_tasks & set(e[2])
        seen_tasks |= set(e[2])
    retrieved = {lab.task_id: lab.y for lab in shared.run.labels.labels if lab.kind == "retrieved"}
    used_ids: set = set()
    policy_updates = 0
    last = None
    for e in train:
        if e[0] == "sample":
            last = e
            continue
        _, _, paths, _, w_policy = e
        assert w_policy == 1.0
        if not paths:  # the update after a probing window: value labels only, no path at all
            continue
        policy_updates += 1
        _, _, task_ids, ctxs, res = last
        assert len(paths) == len(task_ids) <= UPDATE_EVERY
        for p, tid, ctx, (members, actions, _) in zip(paths, task_ids, ctxs, res):
            assert np.array_equal(p.ctx, ctx) and np.array_equal(p.actions, actions)
            assert p.y == pytest.approx(retrieved.get(tid, 0.0)) and (tid in retrieved) == bool(members)
        assert not used_ids & {id(p) for p in paths}, "a path is used by one update only"
        used_ids |= {id(p) for p in paths}
    assert policy_updates == len(samples)


# ---------------------------------------------------------------------------------------- probing
def test_probes_come_from_the_neighbourhood_and_are_feasible(shared):
    run = shared.run
    p = shared.cfg.probing
    assert shared.windows
    for win, picks, labels in shared.windows:
        assert 0 < len(picks) <= p.budget and len(labels) == len(picks)
        assert len({(ti, set_key(ms)) for ti, ms in picks}) == len(picks), "no probe twice"
        for ti, members in picks:
            wt = win.tasks[ti]
            ids = [m.mem_id for m in members]
            recall = {m.mem_id for m in wt.cands.memories}
            top = {m.mem_id for m in wt.cands.memories[:p.probe_candidates or None]}  # 0 = all of C(c)
            assert 1 <= len(ids) <= K and len(set(ids)) == len(ids)
            assert sum(m.tokens for m in members) <= run.retriever.budget
            assert set(ids) <= recall
            assert not wt.path or set_key(members) != set_key(wt.path), "the retrieved set is already labelled"
            M = set(ids)
            edits = [(M - P, P - M) for P in ({m.mem_id for m in wt.path[:j]} for j in range(len(wt.path) + 1))]
            assert any(len(add) <= 1 and len(rem) <= 1 and add <= top for add, rem in edits), (ids, wt.path)


# ---------------------------------------------------------------------------------------- beam
def test_beam_returns_empty_set_when_everything_scores_below_zero(shared):
    run = shared.run
    tr = run.trainer
    tasks = shared.eval
    cands = [run.retriever.candidates(t) for t in tasks]
    assert all(c.memories for c in cands)
    saved = tr.params
    try:
        tr.params = {**saved, "b": jnp.asarray(-100.0, jnp.float32)}
        c0 = cands[0]
        singles = np.stack([run.retriever.set_rows(c0.task, [m])[1] for m in c0.memories])
        masks = np.stack([run.retriever.set_rows(c0.task, [m])[2] for m in c0.memories])
        ctx = np.repeat(c0.ctx[None], len(singles), 0)
        assert (tr.scores(ctx, singles, masks) < 0).all()
        beam = run.retriever.beam(cands)
        assert all(s == [] and v == 0.0 for s, v in beam)
        ev = run.evaluate(tasks, repeats=1, rows=("no_memory", "upliftmem"))
        assert ev.set_sizes["upliftmem"] == [[0] * len(tasks)]
        assert ev.sets["upliftmem"] == [[()] * len(tasks)]
        assert ev.rewards["upliftmem"] == ev.rewards["no_memory"]  # the same ∅ execution, read back
        assert run.eval_counts["total"] == len(tasks) and run.eval_counts["reused"] == len(tasks)

        tr.params = {**saved, "b": jnp.asarray(100.0, jnp.float32)}
        beam = run.retriever.beam(cands)
        assert all(1 <= len(s) <= K and v > 0 for s, v in beam)
        ev = run.evaluate(tasks, repeats=1, rows=("upliftmem",))
        assert all(n >= 1 for n in ev.set_sizes["upliftmem"][0])
    finally:
        tr.params = saved


def test_the_acquisition_mode_comes_from_the_config(shared):
    """ProbingSection.mode reaches the acquisition program: softmax samples (App. B.2), argmax is greedy
    (its picks do not depend on the key; the kernel's own tests check argmax V_t)."""
    import dataclasses

    import jax

    from cfjax.kernels.acquire import ARGMAX, SOFTMAX
    from cfjax.uplift.probing import acquire, build_window

    run, p = shared.run, shared.cfg.probing
    win = shared.windows[0][0]
    assert int(win.inputs.mode) == ARGMAX and p.mode == "argmax"  # the default since issue 22
    soft = build_window(win.tasks, run.retriever, run.labels, dataclasses.replace(p, mode="softmax"),
                        np.random.default_rng(0))
    assert int(soft.inputs.mode) == SOFTMAX
    greedy = dataclasses.replace(p, mode="argmax")
    w2 = build_window(win.tasks, run.retriever, run.labels, greedy, np.random.default_rng(0))
    assert int(w2.inputs.mode) == ARGMAX
    a = acquire(w2, greedy, jax.random.PRNGKey(0), budget=1)
    b = acquire(w2, greedy, jax.random.PRNGKey(1), budget=1)
    assert a == b  # greedy: the key does not matter
    with pytest.raises(ValueError, match="mode must be 'softmax' or 'argmax'"):
        dataclasses.replace(p, mode="boltzmann")


def test_prune_by_bound_by_hand():
    """B.2's pruning: the comparisons with the largest σ_j, then the probes with the largest σ over their
    comparisons (ties: the earlier one); both lists in the original order."""
    from cfjax.uplift.probing import prune_by_bound

    probes = ["a", "b", "c", "d"]
    comps = [("a", "base"), ("b", "a"), ("c", "base"), ("b", "c")]
    sigma = np.array([0.1, 0.5, 0.5, 0.2])
    # comparisons: 0.5 (j=1), 0.5 (j=2) → keep [1, 2]; probe bounds: a 0.5, b 0.5, c 0.5, d 0 → keep a, b
    assert prune_by_bound(probes, comps, sigma, 2, 2) == ([0, 1], [1, 2])
    assert prune_by_bound(probes, comps, np.array([0.9, 0.1, 0.3, 0.2]), 1, 3) == ([0], [0, 2, 3])
    assert prune_by_bound(probes, comps, sigma, 10, 10) == ([0, 1, 2, 3], [0, 1, 2, 3])  # under the caps


def test_a_window_over_its_caps_is_pruned_by_bound(shared):
    import dataclasses

    from cfjax.uplift.probing import build_window

    run, p = shared.run, shared.cfg.probing
    win = shared.windows[0][0]
    small = dataclasses.replace(p, prune="bound", max_pool=8, max_comparisons=8)
    w = build_window(win.tasks, run.retriever, run.labels, small, np.random.default_rng(0))
    assert w.n_pool_total > 8 and w.n_comp_total > 8
    assert len(w.sets) == 8 and len(w.comparisons) == 8 and int(np.asarray(w.inputs.cand_mask).sum()) == 8
    again = build_window(win.tasks, run.retriever, run.labels, small, np.random.default_rng(99))
    assert [(ti, [m.mem_id for m in ms]) for ti, ms in again.sets] == \
        [(ti, [m.mem_id for m in ms]) for ti, ms in w.sets]  # deterministic: no sampling


def test_posterior_mean_shifts_each_margin_by_the_blr_residual(shared):
    """posterior_mean: μ_j = (G(X) − G(B)) + h_jᵀm, m the BLR posterior mean of y − G on φ (the same
    posterior as Σ); without it, the scorer's margin alone (both from the earlier defaults otherwise)."""
    import dataclasses

    from cfjax.config.uplift import LEGACY_PROBING
    from cfjax.uplift.probing import build_window, posterior_cov

    run, p = shared.run, dataclasses.replace(shared.cfg.probing, **LEGACY_PROBING)
    win = shared.windows[0][0]
    plain = build_window(win.tasks, run.retriever, run.labels, p, np.random.default_rng(0))
    with_mean = build_window(win.tasks, run.retriever, run.labels, dataclasses.replace(p, posterior_mean=True),
                             np.random.default_rng(0))
    m, cov = posterior_cov(run.trainer, run.labels, p, with_mean=True)
    np.testing.assert_allclose(cov, posterior_cov(run.trainer, run.labels, p), atol=1e-6)
    # m by a dense float64 solve of the same regression: A = λI + XᵀX/ν², m = A⁻¹Xᵀr/ν²
    ctx, rows, mask, y = run.labels.arrays()
    X = np.asarray(run.trainer.features(ctx, rows, mask), np.float64)
    r = y - np.asarray(run.trainer.scores(ctx, rows, mask), np.float64)
    A = p.prior_precision * np.eye(X.shape[1]) + X.T @ X / p.blr_noise_var
    np.testing.assert_allclose(m, np.linalg.solve(A, X.T @ r / p.blr_noise_var), rtol=2e-3, atol=2e-4)
    cm = np.asarray(plain.inputs.comp_mask)
    h = np.asarray(plain.inputs.directions)[cm]
    np.testing.assert_allclose(np.asarray(with_mean.inputs.means)[cm], np.asarray(plain.inputs.means)[cm] + h @ m,
                               rtol=1e-4, atol=1e-5)


def test_calibrated_margins_and_one_noise_model(shared):
    """calibration = "scale": μ_j = a·(G(X) − G(B)), a the ridge-to-1 fit of y on G over every label, and the
    BLR regresses y − a·G. noise = "bernoulli": the BLR weighs label i by 1/(ν_i² + ν_0²), ν_i² =
    max(floor, p(1 − p)) at p = |a·G_i| — checked against a dense float64 solve — and each probe's ν_q² in
    Ω is the same function at its own prediction."""
    import dataclasses

    from cfjax.config.uplift import LEGACY_PROBING
    from cfjax.uplift.probing import beliefs, build_window, calibration_scale, label_noise

    run, p = shared.run, dataclasses.replace(shared.cfg.probing, **LEGACY_PROBING)
    win = shared.windows[0][0]
    ctx, rows, mask, y = run.labels.arrays()
    X = np.asarray(run.trainer.features(ctx, rows, mask), np.float64)
    G = np.asarray(run.trainer.scores(ctx, rows, mask), np.float64)
    a_hand = max(0.0, (G @ y + p.calibration_prior) / (G @ G + p.calibration_prior))
    cal = dataclasses.replace(p, calibration="scale", noise="bernoulli")
    a = calibration_scale(G, y, cal)
    assert a == pytest.approx(a_hand, rel=1e-6) and a != pytest.approx(1.0)
    plain = build_window(win.tasks, run.retriever, run.labels, p, np.random.default_rng(0))
    w = build_window(win.tasks, run.retriever, run.labels, cal, np.random.default_rng(0))
    cm = np.asarray(plain.inputs.comp_mask)
    np.testing.assert_allclose(np.asarray(w.inputs.means)[cm], a * np.asarray(plain.inputs.means)[cm],
                               rtol=1e-5, atol=1e-7)
    bel = beliefs(run.trainer, run.labels, cal)
    pr = np.minimum(1.0, np.abs(a * G))
    w_i = 1.0 / (np.maximum(cal.noise_floor, pr * (1 - pr)) + cal.ref_noise_var)
    A = cal.prior_precision * np.eye(X.shape[1]) + X.T @ (X * w_i[:, None])
    np.testing.assert_allclose(bel.cov, np.linalg.inv(A), rtol=2e-3, atol=1e-4)  # float32 Cholesky
    np.testing.assert_allclose(bel.mean, np.linalg.solve(A, X.T @ ((y - a * G) * w_i)), rtol=2e-3, atol=2e-4)
    qm = np.asarray(w.inputs.cand_mask)
    assert np.all(np.asarray(w.inputs.noise_var)[~qm] == cal.noise_var)  # padding: unused
    ms = [ms for _, ms in w.sets]
    arrs = [run.retriever.set_rows(win.tasks[ti].cands.task, m) for ti, m in w.sets]
    Gq = run.trainer.scores(np.stack([r[0] for r in arrs]), np.stack([r[1] for r in arrs]),
                            np.stack([r[2] for r in arrs]))
    np.testing.assert_allclose(np.asarray(w.inputs.noise_var)[:len(ms)], label_noise(a * Gq, cal), rtol=1e-5)
