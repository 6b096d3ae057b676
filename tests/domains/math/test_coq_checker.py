"""The Coq checker of untrusted proof bodies (cfjax/domains/math/coq.py): verdicts, feedback, refusals,
resource bounds, the persistent REPL's clean state, the OS layers around Coq — in both ways of running
Coq (a persistent ``coqtop`` per preamble, and one fresh ``coqc`` per check), which must agree.

Every test is skipped with the install hint when Coq is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cfjax
from cfjax.domains.math.coq import INSTALL_HINT, CoqChecker, CoqVerdict, coq_info, split_sentences
from cfjax.sandbox import missing, probe

pytestmark = pytest.mark.skipif(coq_info() is None, reason=INSTALL_HINT)

PROJECT = Path(cfjax.__file__).resolve().parents[1]
PRE = "Require Import Arith Lia.\n"
ADD0 = "forall n : nat, n + 0 = n"
LAYERS_ON = not missing(probe())


@pytest.fixture(scope="module")
def checkers():
    p = CoqChecker(persistent=True, timeout_s=5.0)
    f = CoqChecker(persistent=False, timeout_s=5.0)
    yield {"persistent": p, "fresh": f}
    p.close()
    f.close()


def _both(checkers, statement, proof, preamble=PRE, **kw) -> tuple[CoqVerdict, CoqVerdict]:
    vp = checkers["persistent"].check(preamble, statement, proof, **kw)
    vf = checkers["fresh"].check(preamble, statement, proof, **kw)
    return vp, vf


def _same(vp: CoqVerdict, vf: CoqVerdict) -> None:
    """The two ways give the same verdict (all but the time)."""
    key = lambda v: (v.ok, v.status, v.sentence, v.line, v.failing, v.message, v.goals, v.sandbox_missing)  # noqa
    assert key(vp) == key(vf), (vp, vf)


# ------------------------------------------------------------------------------------ sentences


def test_split_sentences():
    text = ("intros n. (* a comment. with dots. *) induction n as [|n IH].\n"
            "- reflexivity.\n"
            "-- simpl. rewrite Nat.add_comm.\n"
            "  + { exact I. }\n"
            "2: { auto. }\n"
            'idtac "a string. with a dot"". and a quote".\n'
            "(* nested (* comment *) with \" a string *) inside \" *) auto...\n"
            "exact (f x.(y)).")
    got = split_sentences(text)
    assert [s for s, _ in got] == [
        "intros n.", "induction n as [|n IH].", "-", "reflexivity.", "--", "simpl.", "rewrite Nat.add_comm.",
        "+", "{", "exact I.", "}", "2: {", "auto.", "}", 'idtac "a string. with a dot"". and a quote".',
        "auto...", "exact (f x.(y))."]
    assert [ln for _, ln in got] == [1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 7, 8]
    # unterminated pieces come last, as they are
    assert split_sentences("auto. (* open") == [("auto.", 1), ("(* open", 1)]
    assert split_sentences("auto.\nexact I") == [("auto.", 1), ("exact I", 2)]
    # a dot followed by any blank (even a Unicode one) ends a sentence: nothing hides behind it
    assert [s for s, _ in split_sentences("idtac.\u00a0Qed.")] == ["idtac.", "Qed."]
    assert [s for s, _ in split_sentences("idtac.\x0bQed.")] == ["idtac.", "Qed."]


def test_coq_reads_the_same_sentences(checkers):
    """Tricky lexing (strings inside comments, ``""`` escapes, multi-byte characters, ``...``,
    selectors with braces) — the fresh path accepts only when ``coqc -time``'s own sentence ranges
    equal the checker's, so ``proved`` here means Coq cut the text the same way."""
    proof = ('(* " *) idtac. (* " *)\nidtac "a""b é". (* ü *) split...\n'
             "2: { exact I. }\n- exact I.")
    vp, vf = _both(checkers, "True /\\ True", proof)
    assert vf.status == "proved" and vp.status == "proved", (vp, vf)


# --------------------------------------------------------------------------------------- verdicts


CASES = {
    "correct": (ADD0, "intros n.\nlia.", "proved", None, None),
    "wrong_tactic": (ADD0, "intros n.\nsplit.", "error", 1, 2),
    "unknown_lemma": (ADD0, "intros n.\n  rewrite Nat.add_0_rgt.\nreflexivity.", "error", 1, 2),
    "syntax_error": (ADD0, "intros n.\nrewrite (Nat.add_0_r .", "error", 1, 2),
    "unfinished": (ADD0, "intros n.\ninduction n.", "incomplete", None, None),
    "admit": (ADD0, "intros n. admit.", "incomplete", None, None),
    "give_up": ("True /\\ True", "split. give_up. exact I.", "incomplete", None, None),
    "shelved_evar": ("exists n : nat, n = n", "eexists. shelve.", "incomplete", None, None),
    "unterminated": (ADD0, "intros n.\nlia", "error", 1, 2),
    "unterminated_comment": (ADD0, "intros n. (* lia.", "error", 1, 1),
    "bullets_and_braces": ("True /\\ (True /\\ True)", "split.\n- exact I.\n- split.\n  + { exact I. }\n  + exact I.",
                           "proved", None, None),
    "wrong_bullet": ("True /\\ True", "split.\n- exact I.\nexact I.", "error", 3, 3),
    "empty": ("True", "", "incomplete", None, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verdicts_agree_in_both_ways(checkers, case):
    statement, proof, status, sentence, line = CASES[case]
    vp, vf = _both(checkers, statement, proof)
    _same(vp, vf)
    assert (vp.status, vp.sentence, vp.line) == (status, sentence, line), vp
    assert vp.ok is (status == "proved")
    if status == "error":
        assert vp.message.startswith("Error:") and "characters" not in vp.message and "Toplevel" not in vp.message
        assert vp.failing == split_sentences(proof)[sentence][0]
    if LAYERS_ON and case not in ("unterminated", "unterminated_comment"):
        assert vp.sandbox_missing == () and vf.sandbox_missing == (), (vp, vf)


def test_feedback_is_what_a_coq_user_sees(checkers):
    proof = "intros n.\n(* step two *)\n\n  rewrite Nat.add_0_rgt.\nreflexivity."
    vp, vf = _both(checkers, ADD0, proof, goals=True)
    _same(vp, vf)
    assert (vp.sentence, vp.line, vp.failing) == (1, 4, "rewrite Nat.add_0_rgt.")
    assert vp.message == "Error: The reference Nat.add_0_rgt was not found in the current environment."
    # the goal state before the failing sentence (rich feedback), without evar numbers
    assert "n : nat" in vp.goals and "n + 0 = n" in vp.goals and "(ID" not in vp.goals, vp.goals
    plain = checkers["persistent"].check(PRE, ADD0, proof)
    assert plain.goals == "" and plain.message == vp.message
    # an unfinished proof shows what is left
    vp, vf = _both(checkers, ADD0, "intros n. induction n.", goals=True)
    _same(vp, vf)
    assert vp.status == "incomplete" and "incomplete proof" in vp.message and "2 goals" in vp.goals, vp


def test_axioms_are_never_accepted(checkers):
    vp, vf = _both(checkers, "forall P : Prop, P \\/ ~ P", "intros P. apply classic.",
                   preamble="Require Import Classical.")
    _same(vp, vf)
    assert vp.status == "axiom" and not vp.ok and "classic" in vp.message, vp


FORBIDDEN_PROOFS = {
    "qed_then_axiom": ("exact I. Qed. Axiom f : False.", "Qed"),
    "declare_ml_module": ('Declare ML Module "evil_plugin".', "Declare"),
    "load": ('Load "/etc/passwd".', "Load"),
    "redirect": ('Redirect "/tmp/cfjax_redirect" Print nat.', "Redirect"),
    "extraction": ('Extraction "/tmp/cfjax_x.ml" nat.', "Extraction"),
    "recursive_extraction": ("Recursive Extraction nat.", "Recursive"),
    "drop": ("Drop.", "Drop"),
    "defined": ("exact I. Defined.", "Defined"), "admitted": ("Admitted.", "Admitted"),
    "abort": ("Abort.", "Abort"), "proof": ("Proof. exact I.", "Proof"),
    "theorem": ("Theorem t : True.", "Theorem"), "lemma": ("Lemma t : True.", "Lemma"),
    "definition": ("Definition x := 1.", "Definition"), "fixpoint": ("Fixpoint f (n : nat) := n.", "Fixpoint"),
    "axiom": ("Axiom f : False.", "Axiom"), "parameter": ("Parameter p : nat.", "Parameter"),
    "hypothesis": ("Hypothesis h : False.", "Hypothesis"), "variable": ("Variable v : nat.", "Variable"),
    "conjecture": ("Conjecture c : False.", "Conjecture"), "instance": ("Instance i : True := I.", "Instance"),
    "require": ("Require Import Lia.", "Require"), "import": ("Import Nat.", "Import"),
    "export": ("Export Nat.", "Export"),
    "add_loadpath": ('Add LoadPath "/tmp" as X.', "Add"), "add_rec_loadpath": ('Add Rec LoadPath "/tmp" as X.', "Add"),
    "add_ml_path": ('Add ML Path "/tmp".', "Add"), "cd": ('Cd "/tmp".', "Cd"), "print": ("Print nat.", "Print"),
    "set": ("Set Printing All.", "Set"), "unset": ("Unset Guard Checking.", "Unset"),
    "local": ("Local Set Printing All.", "Local"), "global": ("Global Set Printing All.", "Global"),
    "attribute": ("#[local] Set Printing All.", "#"), "time": ("Time exact I.", "Time"),
    "timeout": ("Timeout 1 exact I.", "Timeout"), "fail": ("Fail exact I.", "Fail"),
    "succeed": ("Succeed exact I.", "Succeed"), "module": ("Module M.", "Module"),
    "section": ("Section S.", "Section"), "end": ("End S.", "End"), "reset": ("Reset Initial.", "Reset"),
    "back": ("Back.", "Back"), "backto": ("BackTo 1.", "BackTo"), "restart": ("Restart.", "Restart"),
    "ltac": ("Ltac t := idtac.", "Ltac"), "hint": ("Hint Resolve I : core.", "Hint"),
    "notation": ('Notation "x" := I.', "Notation"), "tactic_notation": ('Tactic Notation "t" := idtac.', "Tactic"),
    "opaque": ("Opaque plus.", "Opaque"), "transparent": ("Transparent plus.", "Transparent"),
    "arguments": ("Arguments plus : simpl never.", "Arguments"), "goal": ("Goal True.", "Goal"),
    "show": ("Show.", "Show"), "undo": ("Undo.", "Undo"),
    "hidden_behind_a_unicode_blank": ("exact I.\u00a0Qed.", "Qed"),
    "after_a_selector": ("all: Qed.", "Qed"),
}


@pytest.mark.parametrize("case", sorted(FORBIDDEN_PROOFS))
def test_forbidden_commands_are_refused(checkers, case):
    proof, word = FORBIDDEN_PROOFS[case]
    for v in _both(checkers, "True", proof):
        assert (v.ok, v.status) == (False, "refused"), (case, v)
        assert v.sentence is not None and v.line == 1 and v.failing
        assert f"`{word}" in v.message, (case, v.message)
        assert v.seconds < 0.5  # refused before Coq runs
    assert not Path("/tmp/cfjax_redirect.out").exists() and not Path("/tmp/cfjax_x.ml").exists()


def test_not_a_tactic_is_refused_by_shape(checkers):
    for proof in ("Foo.", "1 = 1.", "'x.", "MyTactic."):
        v = checkers["persistent"].check(PRE, "True", proof)
        assert v.status == "refused" and "does not start a tactic" in v.message, (proof, v)
    # qualified tactic names and the usual tactic forms pass the shape test
    v = checkers["persistent"].check(PRE, "True", "(exact I).")
    assert v.ok, v


def test_preamble_statement_and_name_are_validated(checkers):
    c = checkers["persistent"]
    for pre, bad in (("Axiom f : False.", "Axiom"), ("Require Import NoSuchLibrary.", "NoSuchLibrary"),
                     ("Unset Guard Checking.", "Guard Checking"), ('Load "/etc/passwd".', "Load"),
                     ("Require Import Arith.\nDeclare ML Module \"x\".", "line 2"), ("From Evil Require X.", "From")):
        with pytest.raises(ValueError, match=bad):
            c.check(pre, "True", "exact I.")
    for st in ("True. Axiom f : False", "True (* open", "True. Qed"):
        with pytest.raises(ValueError):
            c.check(PRE, st, "exact I.")
    with pytest.raises(ValueError):
        c.check(PRE, "nat_no_such_type", "exact I.")  # the statement fails in Coq: the suite's error
    for name in ("Qed", "a b", "1x", "cfjax_sync_1", ""):
        with pytest.raises(ValueError):
            c.check(PRE, "True", "exact I.", name=name)
    ok = c.check("From Coq Require Import Lia.\n(* a comment *)\nLocal Open Scope nat_scope.\nSet Implicit Arguments.",
                 ADD0, "intros; lia.")
    assert ok.ok, ok


# -------------------------------------------------------------------------------------- resources


@pytest.fixture(scope="module")
def short():
    p = CoqChecker(persistent=True, timeout_s=1.0)
    f = CoqChecker(persistent=False, timeout_s=1.0)
    yield {"persistent": p, "fresh": f}
    p.close()
    f.close()


def test_a_hang_is_a_timeout_and_the_checker_recovers(short):
    for mode, c in short.items():
        t0 = time.perf_counter()
        v = c.check(PRE, "True", "idtac.\ndo 100000000 idtac.\nexact I.")
        assert (v.status, v.sentence, v.line) == ("timeout", 1, 2), (mode, v)
        assert time.perf_counter() - t0 < 1.0 + 8.0, mode  # the timeout, plus starting Coq on a loaded machine
        after = c.check(PRE, "True", "exact I.")
        assert after.ok, (mode, after)


def test_memory_exhaustion_is_an_outcome(short):
    for mode, c in short.items():
        v = c.check(PRE, "True", "let x := eval vm_compute in (Nat.pow 10 1000) in idtac.\nexact I.")
        assert v.status in ("memory", "timeout") and not v.ok, (mode, v)
        assert c.check(PRE, "True", "exact I.").ok, mode


def test_deep_recursion_is_an_outcome(short):
    for mode, c in short.items():
        v = c.check(PRE, "True", "let x := eval compute in (Nat.pow 2 30) in idtac.")
        assert v.status in ("memory", "timeout") and v.sentence in (0, None), (mode, v)


def test_output_flood_is_bounded(tmp_path):
    c = CoqChecker(persistent=True, timeout_s=5.0, max_output_bytes=1 << 20)
    try:
        v = c.check(PRE, "True", 'do 200000 idtac "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".')
        assert v.status in ("memory", "timeout") and not v.ok, v
        assert c.check(PRE, "True", "exact I.").ok
    finally:
        c.close()


# ---------------------------------------------------------------------------- the persistent REPL


def test_a_check_leaves_no_state_behind(checkers):
    c = checkers["persistent"]
    assert c.check(PRE, "1 + 1 = 2", "reflexivity.", name="lemma_from_check_a").ok
    assert c.check(PRE, "True", "abstract exact I.", name="abs_a").ok  # defines abs_a_subproof at Qed
    for ref in ("lemma_from_check_a", "abs_a_subproof", "cfjax_goal"):
        v = c.check(PRE, "True", f"pose proof {ref} as H. exact I.")
        assert v.status == "error" and "was not found" in v.message, (ref, v)
    # a failed or unfinished check leaves no open proof: the next one starts clean
    assert c.check(PRE, "True /\\ True", "split.").status == "incomplete"
    assert c.check(PRE, "True", "exact I.").ok
    repl = c._repls[next(k for k in c._repls if k == ("Require Import Arith Lia.",))]
    assert repl.state == repl.base and not repl.proofs.strip()
    # options of one preamble do not leak into another preamble's process
    imp = c.check("Set Printing All.", "1 + 1 = 2", "idtac. foo.")
    plain = c.check("", "1 + 1 = 2", "idtac. foo.")
    assert imp.status == plain.status == "error"


def test_forged_prompts_and_verdicts_do_not_pass(checkers):
    """A tactic that prints a fake prompt, a fake ``Closed under the global context`` or a fake
    ``Chars`` line cannot make an unfinished proof pass (the persistent REPL then re-checks with a
    fresh ``coqc``, which compares Coq's own sentence ranges)."""
    fake = ('idtac "<prompt>Coq < 9 || 0 < </prompt>Closed under the global context\n'
            '<prompt>Coq < 10 || 0 < </prompt>". idtac "Chars 0 - 5 [x] 0. secs". split.')
    vp, vf = _both(checkers, "True /\\ True", fake)
    assert not vp.ok and not vf.ok and vp.status == vf.status == "incomplete", (vp, vf)
    ok = 'idtac "<prompt>Coq < 9 || 0 < </prompt>". exact I.'
    vp, vf = _both(checkers, "True", ok)
    assert vp.ok and vf.ok, (vp, vf)


def test_lru_of_processes():
    c = CoqChecker(persistent=True, max_processes=2)
    try:
        for pre in ("", "Require Import Arith.", "Require Import Bool.", ""):
            assert c.check(pre, "True", "exact I.").ok
        assert len(c._repls) == 2 and list(c._repls) == [("Require Import Bool.",), ()]
    finally:
        c.close()
        c.close()  # idempotent
    assert c._repls == {}


# ---------------------------------------------------------------------------------------- sandbox


@pytest.mark.skipif(not LAYERS_ON, reason=f"OS layers missing here: {missing(probe())}")
def test_the_os_layers_contain_what_the_refusal_would_miss(tmp_path):
    """Commands that never get past the refusal, run raw in the sandboxed ``coqc`` (as if a refusal
    had a gap): no file is written outside the scratch tmpfs, no host file can be read. The control
    without the OS layers shows each one is real."""
    canary = tmp_path / "canary"
    canary.mkdir()
    os.chmod(tmp_path, 0o777)
    os.chmod(canary, 0o777)
    secret = tmp_path / "secret.v"
    secret.write_text("Definition leaked_secret := 7.\n")
    os.chmod(secret, 0o644)
    raw = (f'Redirect "{canary}/redirected" Print nat.\n'
           f'Require Extraction. Extraction "{canary}/extracted.ml" nat.\n'
           f'Load "{secret}". Print leaked_secret.\n')

    def run(isolation):
        c = CoqChecker(persistent=False, isolation=isolation, scratch_root=str(tmp_path))
        outs = []
        for line in raw.splitlines():
            r = c._run_coqc(line + "\n", 0)
            outs.append(r.out)
        return outs, sorted(p.name for p in canary.iterdir())

    outs, written = run("os")
    assert written == [], written
    assert all("System error" in o for o in outs[:2]), outs[:2]  # read-only root, or no such path there
    assert "Can't find file" in outs[2] and "leaked_secret =" not in outs[2], outs[2]  # not in the private root
    outs, written = run("none")
    assert written == ["extracted.ml", "extracted.mli", "redirected.out"], written  # the control: they are real
    assert "leaked_secret = 7" in outs[2], outs[2]


_NONROOT = r"""
import json, os, sys
from cfjax.domains.math.coq import CoqChecker
out = {"euid": os.geteuid()}
for persistent in (True, False):
    c = CoqChecker(persistent=persistent, scratch_root=sys.argv[1])
    res = {}
    for name, proof in {"ok": "intros; lia.", "bad": "intros. foo.", "refused": "Qed."}.items():
        v = c.check("Require Import Arith Lia.", "forall n : nat, n + 0 = n", proof)
        res[name] = [v.status, v.sentence, list(v.sandbox_missing)]
    c.close()
    out[str(persistent)] = res
print(json.dumps(out))
"""


@pytest.mark.skipif(not LAYERS_ON, reason=f"OS layers missing here: {missing(probe())}")
def test_checker_as_a_non_root_user(tmp_path):
    """The same checker started by a non-root user (uid 1000 in a user namespace): the unprivileged
    path of every layer works for Coq too."""
    if subprocess.run(["unshare", "--user", "--map-user=1000", "--map-group=1000", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("unshare --user is not available here")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.chmod(tmp_path, 0o777)
    os.chmod(scratch, 0o777)
    res = subprocess.run(["unshare", "--user", "--map-user=1000", "--map-group=1000", sys.executable, "-c", _NONROOT,
                          str(scratch)], capture_output=True, text=True, timeout=120, cwd=str(PROJECT))
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["euid"] == 1000
    for mode in ("True", "False"):
        assert out[mode]["ok"] == ["proved", None, []], out
        assert out[mode]["bad"] == ["error", 1, []], out
        assert out[mode]["refused"][0] == "refused", out


def test_coq_info():
    info = coq_info()
    assert set(info) == {"coqc", "coqtop", "version", "stdlib"}
    assert info["version"][0].isdigit() and os.path.isdir(info["stdlib"])


def test_checker_pickles_without_its_processes(checkers):
    import pickle

    c = pickle.loads(pickle.dumps(checkers["persistent"]))
    assert c._repls == {} and c.check(PRE, "True", "exact I.").ok
    c.close()
