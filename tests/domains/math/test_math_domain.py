"""The math domain as a domain: its edit model, suite, world and scripted error model
(cfjax/domains/math/). The Coq checker itself is tests/domains/math/test_coq_checker.py, the data
tests/domains/math/test_math_theorems.py; the cross-domain contract (information boundary,
twin-free splits, rule edits, bad actions) runs on math from tests/domains/test_domain_registry.py."""

from __future__ import annotations

import random
import shutil

import pytest

from cfjax.domains.math.edits import CoqEdits, sentences
from cfjax.types import EditError

E = CoqEdits()
PROOF = "intros n m.\ninduction n as [|n' IH].\n- simpl. rewrite Nat.add_0_r. reflexivity.\n- simpl. lia."


# ------------------------------------------------------------------ the edit model (no Coq needed)
def test_units_are_sentences_with_their_bullets():
    assert sentences("intros. (* a comment. *) simpl.\n  - lia.") == ["intros.", "simpl.", "- lia."]
    assert [u.text for u in E.units(PROOF)] == ["intros n m.", "induction n as [|n' IH].", "- simpl.",
                                                "rewrite Nat.add_0_r.", "reflexivity.", "- simpl.", "lia."]
    assert sentences('exact "a. b".') == ['exact "a. b".']  # a period in a string ends nothing
    for bad in ("intros. simpl", "(* open", 'exact "x.'):
        with pytest.raises(EditError):
            E.units(bad)


def test_replace_insert_and_delete_are_one_unit_edits():
    new = E.replace_unit(PROOF, 6, "nia.")
    assert E.diff_units(PROOF, new)[1:] == (E.units(PROOF)[6], E.units(new)[6])
    ins = E.replace_unit(PROOF, 1, "simpl. induction n as [|n' IH].")  # an inserted sentence
    i, before, after = E.diff_units(PROOF, ins)
    assert (i, before.text, after.text) == (1, "induction n as [|n' IH].", "simpl. induction n as [|n' IH].")
    assert E.replace_unit(PROOF, i, after.text) == ins  # the reported edit reproduces the action
    gone = E.replace_unit(PROOF, 0, "")  # a deleted sentence
    assert E.diff_units(PROOF, gone) == (0, E.units(PROOF)[0], E.units(PROOF)[0].__class__("tactic", ""))
    two = E.replace_unit(new, 0, "intros.")
    assert E.diff_units(PROOF, two) is None  # two changed sentences are not one edit
    with pytest.raises(EditError):
        E.replace_unit(PROOF, 0, "a. b. c.")


def test_signatures_mask_names_not_tactics_and_transfer_binds_them():
    assert E.signature("rewrite <- Nat.add_comm at 2.") == E.signature("rewrite <- Z.mul_comm at 3.")
    assert E.signature("rewrite Nat.add_comm.") != E.signature("rewrite <- Nat.add_comm.")
    assert E.signature("lia.") != E.signature("nia.")
    out = E.transfer("rewrite Nat.add_comm.", "rewrite <- Nat.add_comm.", "intros a b.\nrewrite Z.add_comm.\nlia.")
    assert out == "intros a b.\nrewrite <- Z.add_comm.\nlia."  # the bound name follows the target
    assert E.transfer("induction m as [|m IH].", "induction n as [|n IH].", "induction x as [|x IH].\nauto.") \
        == "induction n as [|n IH].\nauto."
    assert E.transfer("lia.", "nia.", "intros.\nring.") is None  # no sentence of that shape


def test_rule_edits_cover_the_documented_operators():
    edits = {t for _, t in E.rule_edits(PROOF)}
    assert "nia." in edits and "ring." in edits  # lia ↔ nia ↔ ring
    assert "rewrite <- Nat.add_0_r." in edits and "rewrite Nat.add_0_l." in edits  # direction, lemma
    assert "induction m as [|n' IH]." in edits  # another variable
    p2 = "induction n as [|n IH].\n- reflexivity.\n- simpl. auto."
    e2 = {t for _, t in E.rule_edits(p2)}
    assert "intros. induction n as [|n IH]." in e2  # a missing intros
    assert "eauto." in e2 and "induction n as [|n IH]." not in e2
    p3 = "intros b.\n- reflexivity.\n- reflexivity."
    assert "destruct b. - reflexivity." in {t for _, t in E.rule_edits(p3)}  # a missing case split
    for i, t in E.rule_edits(PROOF) + E.rule_edits(p2) + E.rule_edits(p3):
        base = PROOF if (i, t) in E.rule_edits(PROOF) else (p2 if (i, t) in E.rule_edits(p2) else p3)
        assert E.diff_units(base, E.replace_unit(base, i, t)) is not None


# ------------------------------------------------------------------ the suite and the world (Coq)
needs_coq = pytest.mark.skipif(shutil.which("coqc") is None,
                               reason="Coq is not installed: apt-get install coq (Debian/Ubuntu) — the math suite "
                                      "needs its kernel")


@pytest.fixture(scope="module")
def math(tmp_path_factory):
    from cfjax.domains.math import MathSuite

    s = MathSuite.build(tmp_path_factory.mktemp("math"))
    w = s.world()
    yield s, w
    w.close()


def test_suite_tasks_show_the_statement_never_the_proof(math):
    s, _ = math
    assert len(s.tasks) == 204 and len({t.task_id for t in s.tasks}) == 204
    for t in s.tasks:
        k = s.keys[t.task_id]
        assert k.extra["statement"] in t.context and t.domain == "coq"
        assert all(line not in t.context for line in k.gold.splitlines() if len(line) > 12), t.task_id
    sp = s.splits(seed=12345)
    held = {t.env_id for t in sp.build + sp.train}
    assert "z_numtheory" not in held  # the new-environment condition


def test_the_scripted_slip_and_its_true_fix(math):
    s, _ = math
    sc = s.scripted_domain()
    for t in s.tasks:
        gold = E.normalize(s.keys[t.task_id].gold)
        slipped = sc.slip("own", gold, t, random.Random(0))
        assert slipped and slipped != gold
        (i, text), = sc.true_fixes(t, slipped).items()
        assert E.replace_unit(slipped, i, text) == gold  # replacements, insertions and deletions alike


@needs_coq
def test_world_outcomes_correct_wrong_refused_and_rich(math):
    s, w = math
    t = s.tasks[0]
    key = s.keys[t.task_id]
    o = w.evaluate(t, key.gold)
    assert (o.score, o.solved, o.completed) == (1.0, True, True)
    assert w.evaluate(t, "Proof.\n" + key.gold + "\nQed.").solved  # the frame a user pastes is accepted
    slipped = s.scripted_domain().slip("own", E.normalize(key.gold), t, random.Random(0))
    o = w.evaluate(t, slipped)
    assert (o.score, o.solved, o.completed) == (0.0, False, True) and "Sentence" in o.feedback
    assert key.gold not in o.feedback
    for bad in ("admit.", "Admitted.", "intros. Qed. Axiom f : False.", "exact I. Declare ML Module \"x\".", ""):
        o = w.evaluate(t, bad)
        assert not o.solved and o.score == 0.0, bad
    from cfjax.domains.math.world import MathWorld

    with MathWorld(s.keys, feedback="rich") as rich:
        o = rich.evaluate(t, slipped)
        assert not o.solved and "Goals before the failing sentence" in o.feedback


@needs_coq
def test_a_sample_of_golds_and_slips_through_the_world(math):
    """Every gold checks and every slip fails through the world (all 204 of each are checked by
    tests/domains/math/test_math_theorems.py with one Coq process per environment; here every 20th
    through the world's sandboxed, persistent checker)."""
    s, w = math
    sc = s.scripted_domain()
    for t in s.tasks[::20]:
        gold = s.keys[t.task_id].gold
        assert w.evaluate(t, gold).solved, t.task_id
        assert not w.evaluate(t, sc.slip("own", E.normalize(gold), t, random.Random(0))).solved, t.task_id
