"""The math suite's theorems: miniF2F-style problems over ``nat``, ``Z`` and lists, with gold Coq proofs.

The problems are in the style of miniF2F's algebra, number-theory and induction problems (Zheng, Han
and Polu, "miniF2F: a cross-system benchmark for formal Olympiad-level mathematics", ICLR 2022), made
small enough that Coq checks each in milliseconds, plus simple list lemmas. The CounterMem paper's
Math column uses Lean proofs with a tactic as the decision unit; here Coq's kernel (8.16, standard
library only) plays that role and the unit is one tactic sentence of the proof body. Each theorem has
a gold proof and its family's **characteristic slip**: one sentence replaced or deleted, the mistake
that family documents, checked to make Coq reject the proof.

Length: one data module on purpose — the 204 theorems are data (statement, question, gold, slip),
kept beside the tables below that document and count them.

Environments (``ENVS``; the preamble is loaded before ``Theorem name : statement.``):

===============  ==========================================  ========================================
env_id           preamble                                    what is stated over
===============  ==========================================  ========================================
``nat_arith``    ``Require Import Arith Lia.``               ``nat``: +, *, -, ^, <=, <
``nat_bool``     ``Require Import Arith Bool Lia.``          ``bool``, ``n =? m``, ``n <=? m``
``nat_lists``    ``Require Import Arith List Lia.``          ``list nat``: ++, rev, length, map,
                 ``Import ListNotations.``                   filter, In
``z_arith``      ``Require Import ZArith Lia.``              ``Z``: +, *, -, ^, abs, min, max
                 ``Open Scope Z_scope.``
``z_numtheory``  ``Require Import ZArith Znumtheory Lia.``   ``Z``: ``(a | b)``, ``mod``; ``nat``
                 ``Open Scope Z_scope.``                     indices
===============  ==========================================  ========================================

Families and variants. The **base** task is the family's trap, worded with the family's cue; the
**look-alike** is worded like the base (same frame, a cue of the opposite value) and needs the opposite
choice, so the base's correction breaks it — its slip *is* the base's fix applied where it does not
belong; the **new surface** is the base's error under other wording (often another type):

==================  ====================================  ====================================  ======================
family              base: cue → gold; slip                look-alike: cue → gold; slip          new surface: cue
==================  ====================================  ====================================  ======================
``missing_intros``  "Suppose that …" → ``intros`` the     "… for every choice of m" →           "Given that …"
                    premises, then use them by name;      ``intros n`` only, the induction,
                    slip: the ``intros`` sentence         then ``intros m H`` in each case;
                    deleted                               slip: ``intros n m H`` first
``induction_var``   "following the first number/list" →   "following the second number/list" →  "tracking the variable
                    induction on the first-named          induction on the second-named         listed first"
                    variable (the recursive argument);    variable; slip: induction on the
                    slip: induction on another            first
``rewrite_dir``     "… written back as …" →               "… written out as …" → ``rewrite L``  "restated in terms of"
                    ``rewrite <- L`` (or ``<- H``);       (or ``H``); slip: ``rewrite <- L``
                    slip: ``rewrite L``
``wrong_lemma``     the operation the lemma is about:     the neighbouring operation: "the      "the total",
                    "the sum", "at most", "conjunction",  product", "disjunction", "reversal",  "requiring both",
                    "equality test", "concatenation",     "reversing twice", "on the right",    "joining", "leading
                    "reversing the concatenation",        "second factor"; slip: the base's     factor"
                    "mapping", "on the left", "absolute   lemma (``Nat.add_comm`` where
                    value of a product", "first factor",  ``Nat.mul_comm`` is needed, …)
                    "difference", "negated divisor",
                    "divides 0"; slip: a neighbour
                    (``mul`` for ``add``, ``_r`` for
                    ``_l``, ``lt`` for ``le``, ``or``
                    for ``and``, ``rev`` for ``app``) or
                    a nonexistent name
``lia_nia``         "the product" (of unknowns) →         "a constant multiple" → ``lia``;      "the square"
                    ``nia``; slip: ``lia``                slip: ``ring``
``forgotten_case``  "depending on whether … / on the      "regardless of whether … / of the     "considering both
                    sign of …" → ``destruct`` with one    sign of …" → no case split (a lemma   possible …", "treating
                    bullet per case; slip: the            or computation); slip: a step         … separately"
                    ``destruct`` deleted                  replaced by ``destruct x``, which
                                                          leaves a case unproven
==================  ====================================  ====================================  ======================

``CUES`` lists these phrases per family and variant; every question contains one of its cues.

Why the look-alikes look the way they do (Coq 8.16 facts, checked): ``lia`` normalises polynomials,
so it proves ring identities such as ``(a + b)^2 = a^2 + 2ab + b^2`` and even some products of
hypotheses (``0 <= a -> 0 <= b -> 0 <= a * b``); the ``lia_nia`` bases are therefore nonlinear facts
on which ``lia`` reports "Cannot find witness" and ``nia`` succeeds. ``nia`` subsumes ``lia``, so no
linear goal breaks under ``nia``: the look-alike's opposite choice is the polynomial-identity closer
``ring``, which cannot use hypotheses or prove an inequality. A missing ``intros`` before ``lia`` or
``induction`` is harmless in Coq, so the ``missing_intros`` golds use a premise by name (``rewrite H``,
``apply … in H``, ``exact H``, ``destruct H``) right after the ``intros``; the look-alikes' statements
need the induction hypothesis for every ``m``, so introducing ``m`` before the induction breaks the
per-case ``intros m H``. An extra case split never makes a goal unprovable, so the ``forgotten_case``
look-alike slip fails because the remaining steps handle one case only: the other case stays open
(``Qed`` refuses the incomplete proof) or the next step breaks.

Counts (base/look-alike/new surface; 204 theorems: 132 base, 42 look-alike, 30 new surface; 22/7/5 =
65/21/15 % in every family):

==================  ===========  ==========  ===========  ==========  =============  =====
family              nat_arith    nat_bool    nat_lists    z_arith     z_numtheory    total
==================  ===========  ==========  ===========  ==========  =============  =====
missing_intros      5/2/1        4/2/1       5/3/1        4/0/1       4/0/1          34
induction_var       7/3/2        5/2/1       8/2/2        –           2/0/0          34
rewrite_dir         5/2/1        3/1/1       5/2/1        5/1/1       4/1/1          34
wrong_lemma         5/2/1        4/1/1       5/2/1        4/1/1       4/1/1          34
lia_nia             7/2/1        –           3/1/1        7/2/2       5/2/1          34
forgotten_case      5/2/1        6/3/2       5/1/1        4/1/1       2/0/0          34
total               54           37          49           35          29             204
==================  ===========  ==========  ===========  ==========  =============  =====

Every family occurs in at least four environments (``z_numtheory``'s ``induction_var`` tasks induct
on ``nat`` indices of integer divisibility, its ``forgotten_case`` tasks split on a boolean or a sign).

Rules the data keeps (tests/domains/math/test_math_theorems.py checks all of them):

* A question is the informal statement in miniF2F's style plus the family's cue; it never names a
  tactic (no "use nia", no "by induction") or a lemma of the gold (no "by Nat.add_comm").
* Every gold proof is accepted by ``coqc`` and ``Print Assumptions`` reports "Closed under the global
  context"; no ``admit``, ``Admitted``, ``Axiom`` or ``Abort`` appears anywhere; no sentence takes
  more than a few milliseconds.
* Every slip (:func:`slipped`) is rejected by Coq: a sentence fails or ``Qed`` refuses the proof.
* ``(env_id, statement)`` pairs and names are unique; ``tid`` is ``env/family/variant/NN`` (numbered
  in the data's order within its env, family and variant) and ``name`` is derived from it
  (``t_<env>_<family>_<variant><NN>``, e.g. ``t_na_rd_b03``).

The module imports only the standard library, so it can be loaded as a plain file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Env", "Theorem", "ENVS", "FAMILIES", "VARIANTS", "THEOREMS", "CUES", "script", "slipped"]


@dataclass(frozen=True)
class Env:
    """An environment: the libraries and scope a theorem is stated in."""

    env_id: str
    #: the Coq lines before the theorem (``Require Import ...``, ``Open Scope ...``)
    preamble: str
    #: one line shown to the agent: which type and scope, which lemma sets are imported
    description: str


@dataclass(frozen=True)
class Theorem:
    """One theorem with its gold proof and its family's characteristic slip."""

    tid: str
    env_id: str
    family: str
    variant: str
    #: the Coq identifier of the theorem (unique over the file)
    name: str
    #: the statement after ``Theorem name :``, without the final period
    statement: str
    #: the informal request shown to the agent (never names a tactic or a lemma of the gold)
    question: str
    #: one tactic sentence per element (optionally with a bullet ``- ``/``+ ``/``* ``), no Proof./Qed.
    gold: tuple[str, ...]
    #: (sentence index, replacement sentence) or (index, None): the family's one-sentence mistake
    slip: tuple[int, str | None]


ENVS: dict[str, Env] = {
    "nat_arith": Env(
        "nat_arith", "Require Import Arith Lia.\n",
        "natural numbers (nat): Arith (the Nat.* lemmas on +, *, -, <=, <) and Lia (lia, nia) are imported"),
    "nat_bool": Env(
        "nat_bool", "Require Import Arith Bool Lia.\n",
        "natural numbers and booleans (nat, bool): Arith, Bool (andb/orb/negb lemmas; the boolean tests "
        "n =? m and n <=? m with their reflection lemmas) and Lia are imported"),
    "nat_lists": Env(
        "nat_lists", "Require Import Arith List Lia.\nImport ListNotations.\n",
        "lists of natural numbers (list nat) with the [x; y] notation: Arith, List (++, rev, length, map, "
        "filter, In and their lemmas), ListNotations and Lia are imported"),
    "z_arith": Env(
        "z_arith", "Require Import ZArith Lia.\nOpen Scope Z_scope.\n",
        "integers (Z, with Z_scope open): ZArith (the Z.* lemmas on +, *, -, ^, abs, min, max) and Lia "
        "(lia, nia) are imported"),
    "z_numtheory": Env(
        "z_numtheory", "Require Import ZArith Znumtheory Lia.\nOpen Scope Z_scope.\n",
        "integers (Z, with Z_scope open) with divisibility (a | b) and mod: ZArith, Znumtheory (the "
        "Z.divide_* lemmas) and Lia are imported"),
}

FAMILIES = ("missing_intros", "induction_var", "rewrite_dir", "wrong_lemma", "lia_nia", "forgotten_case")
VARIANTS = ("base", "look_alike", "new_surface")

#: family → variant → the cue phrases its questions use (documented in the module docstring)
CUES: dict[str, dict[str, tuple[str, ...]]] = {
    "missing_intros": {"base": ("suppose that",), "look_alike": ("for every choice of",),
                       "new_surface": ("given that",)},
    "induction_var": {"base": ("following the first",), "look_alike": ("following the second",),
                      "new_surface": ("tracking the variable listed first",)},
    "rewrite_dir": {"base": ("written back as",), "look_alike": ("written out as",),
                    "new_surface": ("restated in terms of",)},
    "wrong_lemma": {"base": ("the sum", "at most", "conjunction", "equality test", "concatenation",
                             "reversing the concatenation", "mapping", "on the left", "absolute value of a product",
                             "first factor", "difference", "negated divisor", "divides 0"),
                    "look_alike": ("the product", "disjunction", "reversal", "reversing twice", "on the right",
                                   "second factor"),
                    "new_surface": ("the total", "requiring both", "joining", "leading factor")},
    "lia_nia": {"base": ("the product",), "look_alike": ("a constant multiple",),
                "new_surface": ("the square",)},
    "forgotten_case": {"base": ("depending on",), "look_alike": ("regardless of",),
                       "new_surface": ("considering both possible", "treating", "separately")},
}

_ENV_ABBR = {"nat_arith": "na", "nat_bool": "nb", "nat_lists": "nl", "z_arith": "za", "z_numtheory": "zn"}
_FAM_ABBR = {"missing_intros": "mi", "induction_var": "iv", "rewrite_dir": "rd", "wrong_lemma": "wl",
             "lia_nia": "ln", "forgotten_case": "fc"}
_VAR_ABBR = {"base": "b", "look_alike": "l", "new_surface": "n"}

# (env, family, variant, statement, question, gold — one sentence a line, slip)
_B, _L, _N = "base", "look_alike", "new_surface"
_RAW: list[tuple[str, str, str, str, str, str, tuple[int, str | None]]] = [
    # ================================================================== missing_intros
    # ---- nat_arith
    ("nat_arith", "missing_intros", _B, "forall a b : nat, a = b + 2 -> a * 3 = b * 3 + 6",
     "Suppose that a = b + 2 for natural numbers a and b. Show that 3a = 3b + 6.",
     """intros a b H.
     rewrite H.
     lia.""", (0, None)),
    ("nat_arith", "missing_intros", _B, "forall x y : nat, x + y = 10 -> x = 4 -> y = 6",
     "Suppose that x + y = 10 and x = 4 for natural numbers x and y. Show that y = 6.",
     """intros x y H1 H2.
     rewrite H2 in H1.
     lia.""", (0, None)),
    ("nat_arith", "missing_intros", _B, "forall n m : nat, n <= m -> m <= 5 -> n <= 5",
     "Suppose that n <= m and m <= 5 for natural numbers n and m. Show that n <= 5.",
     """intros n m H1 H2.
     apply Nat.le_trans with (m := m).
     - exact H1.
     - exact H2.""", (0, None)),
    ("nat_arith", "missing_intros", _B, "forall n : nat, n = 3 -> n * n = 9",
     "Suppose that the natural number n equals 3. Show that n^2 = 9.",
     """intros n H.
     rewrite H.
     reflexivity.""", (0, None)),
    ("nat_arith", "missing_intros", _B, "forall a b c : nat, a = b -> b = c -> a + 1 = c + 1",
     "Suppose that a = b and b = c for natural numbers a, b and c. Show that a + 1 = c + 1.",
     """intros a b c H1 H2.
     rewrite H1.
     rewrite H2.
     reflexivity.""", (0, None)),
    ("nat_arith", "missing_intros", _L, "forall n m : nat, n + n = m + m -> n = m",
     "Suppose that n + n = m + m for natural numbers n and m. Show that n = m, for every choice of m.",
     """intros n.
     induction n as [|n IH].
     - intros m H.
     destruct m as [|m].
     + reflexivity.
     + discriminate H.
     - intros m H.
     destruct m as [|m].
     + discriminate H.
     + f_equal.
     apply IH.
     simpl in H.
     lia.""", (0, "intros n m H.")),
    ("nat_arith", "missing_intros", _L, "forall n m : nat, m <= n -> n - m + m = n",
     "Suppose that m <= n for natural numbers n and m. Show that (n - m) + m = n, for every choice of m.",
     """intros n.
     induction n as [|n IH].
     - intros m H.
     inversion H.
     reflexivity.
     - intros m H.
     destruct m as [|m].
     + rewrite Nat.add_0_r.
     reflexivity.
     + simpl.
     rewrite <- plus_n_Sm.
     f_equal.
     apply IH.
     apply le_S_n.
     exact H.""", (0, "intros n m H.")),
    ("nat_arith", "missing_intros", _N, "forall p q : nat, p = q + 1 -> q = 4 -> p = 5",
     "Given that p = q + 1 and q = 4 for natural numbers p and q, show that p = 5.",
     """intros p q H1 H2.
     rewrite H1.
     rewrite H2.
     reflexivity.""", (0, None)),
    # ---- nat_bool
    ("nat_bool", "missing_intros", _B, "forall b c : bool, b = true -> c = true -> b && c = true",
     "Suppose that the booleans b and c are both true. Show that b && c is true.",
     """intros b c Hb Hc.
     rewrite Hb.
     rewrite Hc.
     reflexivity.""", (0, None)),
    ("nat_bool", "missing_intros", _B, "forall n m : nat, n = m -> (n =? m) = true",
     "Suppose that n = m for natural numbers n and m. Show that the boolean test n =? m returns true.",
     """intros n m H.
     rewrite H.
     apply Nat.eqb_refl.""", (0, None)),
    ("nat_bool", "missing_intros", _B, "forall b : bool, negb b = true -> b = false",
     "Suppose that negb b is true for a boolean b. Show that b is false.",
     """intros b H.
     rewrite <- (negb_involutive b).
     rewrite H.
     reflexivity.""", (0, None)),
    ("nat_bool", "missing_intros", _B, "forall n m : nat, (n <=? m) = true -> (m <=? 7) = true -> n <= 7",
     "Suppose that the tests n <=? m and m <=? 7 both return true. Show that n <= 7.",
     """intros n m H1 H2.
     apply Nat.leb_le in H1.
     apply Nat.leb_le in H2.
     lia.""", (0, None)),
    ("nat_bool", "missing_intros", _L, "forall n m : nat, (n =? m) = true -> n = m",
     "Suppose that the boolean test n =? m returns true. Show that n = m, for every choice of m.",
     """intros n.
     induction n as [|n IH].
     - intros m H.
     destruct m as [|m].
     + reflexivity.
     + discriminate H.
     - intros m H.
     destruct m as [|m].
     + discriminate H.
     + f_equal.
     apply IH.
     exact H.""", (0, "intros n m H.")),
    ("nat_bool", "missing_intros", _L, "forall n m : nat, (n <=? m) = true -> n <= m",
     "Suppose that the boolean test n <=? m returns true. Show that n <= m, for every choice of m.",
     """intros n.
     induction n as [|n IH].
     - intros m H.
     apply Nat.le_0_l.
     - intros m H.
     destruct m as [|m].
     + discriminate H.
     + apply le_n_S.
     apply IH.
     exact H.""", (0, "intros n m H.")),
    ("nat_bool", "missing_intros", _N, "forall b c : bool, b || c = false -> b = false",
     "Given that b || c is false for booleans b and c, show that b is false.",
     """intros b c H.
     destruct b.
     - discriminate H.
     - reflexivity.""", (0, None)),
    # ---- nat_lists
    ("nat_lists", "missing_intros", _B, "forall l1 l2 : list nat, l1 = l2 -> length l1 = length l2",
     "Suppose that the lists l1 and l2 are equal. Show that they have the same length.",
     """intros l1 l2 H.
     rewrite H.
     reflexivity.""", (0, None)),
    ("nat_lists", "missing_intros", _B, "forall (l : list nat) (x : nat), l = [x] -> length l = 1",
     "Suppose that l is the one-element list [x]. Show that l has length 1.",
     """intros l x H.
     rewrite H.
     reflexivity.""", (0, None)),
    ("nat_lists", "missing_intros", _B, "forall l1 l2 : list nat, l1 = [] -> l1 ++ l2 = l2",
     "Suppose that the list l1 is empty. Show that appending l2 to l1 gives l2.",
     """intros l1 l2 H.
     rewrite H.
     reflexivity.""", (0, None)),
    ("nat_lists", "missing_intros", _B, "forall (l : list nat) (x : nat), l = x :: [] -> hd 0 l = x",
     "Suppose that l is the list whose only element is x. Show that the head of l (with default 0) is x.",
     """intros l x H.
     rewrite H.
     reflexivity.""", (0, None)),
    ("nat_lists", "missing_intros", _B, "forall l1 l2 : list nat, rev l1 = rev l2 -> l1 = l2",
     "Suppose that the reversals of the lists l1 and l2 are equal. Show that l1 = l2.",
     """intros l1 l2 H.
     rewrite <- (rev_involutive l1).
     rewrite H.
     apply rev_involutive.""", (0, None)),
    ("nat_lists", "missing_intros", _L, "forall l acc : list nat, rev_append l acc = rev l ++ acc",
     "Suppose that acc is an accumulator list. Show that reversing l onto acc gives rev l followed by acc, "
     "for every choice of acc.",
     """intros l.
     induction l as [|x l IH].
     - intros acc.
     reflexivity.
     - intros acc.
     simpl.
     rewrite IH.
     rewrite <- app_assoc.
     reflexivity.""", (0, "intros l acc.")),
    ("nat_lists", "missing_intros", _L,
     "forall (l : list nat) (n : nat), fold_left Nat.add l n = n + fold_left Nat.add l 0",
     "Suppose that n is the starting value of a left fold that adds up the list l. Show that the fold "
     "equals n plus the fold started at 0, for every choice of n.",
     """intros l.
     induction l as [|x l IH].
     - intros n.
     simpl.
     lia.
     - intros n.
     simpl.
     rewrite IH.
     rewrite (IH x).
     lia.""", (0, "intros l n.")),
    ("nat_lists", "missing_intros", _L,
     "forall l1 l2 : list nat, length l1 = length l2 -> length (combine l1 l2) = length l1",
     "Suppose that the lists l1 and l2 have the same length. Show that zipping them gives a list as long as "
     "l1, for every choice of l2.",
     """intros l1.
     induction l1 as [|x l1 IH].
     - intros l2 H.
     reflexivity.
     - intros l2 H.
     destruct l2 as [|y l2].
     + discriminate H.
     + simpl.
     f_equal.
     apply IH.
     injection H as H.
     exact H.""", (0, "intros l1 l2 H.")),
    ("nat_lists", "missing_intros", _N, "forall (l : list nat) (x y : nat), l = [x; y] -> rev l = [y; x]",
     "Given that l is the two-element list [x; y], show that reversing l gives [y; x].",
     """intros l x y H.
     rewrite H.
     reflexivity.""", (0, None)),
    # ---- z_arith
    ("z_arith", "missing_intros", _B, "forall x y : Z, x = 2 * y -> y = 3 -> x = 6",
     "Suppose that x = 2y and y = 3 for integers x and y. Show that x = 6.",
     """intros x y H1 H2.
     rewrite H1, H2.
     reflexivity.""", (0, None)),
    ("z_arith", "missing_intros", _B, "forall a b : Z, a - b = 0 -> a = b",
     "Suppose that a - b = 0 for integers a and b. Show that a = b.",
     """intros a b H.
     rewrite Z.sub_move_0_r in H.
     exact H.""", (0, None)),
    ("z_arith", "missing_intros", _B, "forall x : Z, x + 5 = 12 -> x * x = 49",
     "Suppose that x + 5 = 12 for an integer x. Show that x^2 = 49.",
     """intros x H.
     assert (Hx : x = 7) by lia.
     rewrite Hx.
     reflexivity.""", (0, None)),
    ("z_arith", "missing_intros", _B, "forall a b c : Z, a = b + c -> b = 1 -> c = 2 -> a = 3",
     "Suppose that a = b + c, b = 1 and c = 2 for integers a, b and c. Show that a = 3.",
     """intros a b c H1 H2 H3.
     rewrite H1, H2, H3.
     reflexivity.""", (0, None)),
    ("z_arith", "missing_intros", _N, "forall m n : Z, m = n - 4 -> n = 10 -> m * 2 = 12",
     "Given that m = n - 4 and n = 10 for integers m and n, show that 2m = 12.",
     """intros m n H1 H2.
     rewrite H1, H2.
     reflexivity.""", (0, None)),
    # ---- z_numtheory
    ("z_numtheory", "missing_intros", _B, "forall a b : Z, (a | b) -> (a | b * 5)",
     "Suppose that the integer a divides b. Show that a divides 5b.",
     """intros a b H.
     apply Z.divide_mul_l.
     exact H.""", (0, None)),
    ("z_numtheory", "missing_intros", _B, "forall a b c : Z, (a | b) -> (a | c) -> (a | b + c)",
     "Suppose that the integer a divides both b and c. Show that a divides b + c.",
     """intros a b c H1 H2.
     destruct H1 as [k Hk].
     destruct H2 as [j Hj].
     exists (k + j).
     rewrite Hk, Hj.
     ring.""", (0, None)),
    ("z_numtheory", "missing_intros", _B, "forall a b : Z, a = 6 * b -> (3 | a)",
     "Suppose that a = 6b for integers a and b. Show that 3 divides a.",
     """intros a b H.
     rewrite H.
     exists (2 * b).
     ring.""", (0, None)),
    ("z_numtheory", "missing_intros", _B, "forall a b : Z, (a | b) -> (b | 12) -> (a | 12)",
     "Suppose that a divides b and b divides 12 for integers a and b. Show that a divides 12.",
     """intros a b H1 H2.
     apply (Z.divide_trans a b 12).
     - exact H1.
     - exact H2.""", (0, None)),
    ("z_numtheory", "missing_intros", _N, "forall x y : Z, (x | y) -> (x | - y)",
     "Given that the integer x divides y, show that x divides -y.",
     """intros x y H.
     destruct H as [k Hk].
     exists (- k).
     rewrite Hk.
     ring.""", (0, None)),

    # ================================================================== induction_var
    # ---- nat_arith
    ("nat_arith", "induction_var", _B, "forall n m : nat, n + S m = S (n + m)",
     "Show that for all natural numbers n and m, n + (m + 1) = (n + m) + 1, following the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction m as [|m IH].")),
    ("nat_arith", "induction_var", _B, "forall n m p : nat, n + (m + p) = n + m + p",
     "Show that for all natural numbers n, m and p, n + (m + p) = (n + m) + p, following the first number.",
     """intros n m p.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction m as [|m IH].")),
    ("nat_arith", "induction_var", _B, "forall n m : nat, n * S m = n + n * m",
     "Show that for all natural numbers n and m, n (m + 1) = n + n m, following the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     lia.""", (1, "induction m as [|m IH].")),
    ("nat_arith", "induction_var", _B, "forall n m : nat, n * 0 + m = m",
     "Show that for all natural numbers n and m, n * 0 + m = m, following the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction m as [|m IH].")),
    ("nat_arith", "induction_var", _B, "forall n m : nat, n + m - n = m",
     "Show that for all natural numbers n and m, (n + m) - n = m, following the first number.",
     """intros n m.
     induction n as [|n IH].
     - simpl.
     apply Nat.sub_0_r.
     - simpl.
     exact IH.""", (1, "induction m as [|m IH].")),
    ("nat_arith", "induction_var", _B, "forall n m : nat, n * (m + 1) = n * m + n",
     "Show that for all natural numbers n and m, n (m + 1) = n m + n, following the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     lia.""", (1, "induction m as [|m IH].")),
    ("nat_arith", "induction_var", _B, "forall n m : nat, 2 ^ n * 2 ^ m = 2 ^ (n + m)",
     "Show that for all natural numbers n and m, 2^n 2^m = 2^(n + m), following the first number.",
     """intros n m.
     induction n as [|n IH].
     - simpl.
     lia.
     - simpl.
     rewrite <- IH.
     lia.""", (1, "induction m as [|m IH].")),
    ("nat_arith", "induction_var", _L, "forall n m : nat, m + S n = S (m + n)",
     "Show that for all natural numbers n and m, m + (n + 1) = (m + n) + 1, following the second number.",
     """intros n m.
     induction m as [|m IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction n as [|n IH].")),
    ("nat_arith", "induction_var", _L, "forall n m : nat, m * 0 + n = n",
     "Show that for all natural numbers n and m, m * 0 + n = n, following the second number.",
     """intros n m.
     induction m as [|m IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction n as [|n IH].")),
    ("nat_arith", "induction_var", _L, "forall n m : nat, m * (n + 1) = m * n + m",
     "Show that for all natural numbers n and m, m (n + 1) = m n + m, following the second number.",
     """intros n m.
     induction m as [|m IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     lia.""", (1, "induction n as [|n IH].")),
    ("nat_arith", "induction_var", _N, "forall a b : nat, (a + b) * 3 = a * 3 + b * 3",
     "Show that for all natural numbers a and b, 3 (a + b) = 3a + 3b, tracking the variable listed first.",
     """intros a b.
     induction a as [|a IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction b as [|b IH].")),
    ("nat_arith", "induction_var", _N, "forall x y : nat, x * (y + 2) = x * y + 2 * x",
     "Show that for all natural numbers x and y, x (y + 2) = x y + 2x, tracking the variable listed first.",
     """intros x y.
     induction x as [|x IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     lia.""", (1, "induction y as [|y IH].")),
    # ---- nat_bool
    ("nat_bool", "induction_var", _B, "forall n m : nat, (n + m =? n) = (m =? 0)",
     "Show that for all natural numbers n and m, the test n + m =? n agrees with the test m =? 0, following "
     "the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction m as [|m IH].")),
    ("nat_bool", "induction_var", _B, "forall n m : nat, (n <=? n + m) = true",
     "Show that for all natural numbers n and m, the test n <=? n + m returns true, following the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction m as [|m IH].")),
    ("nat_bool", "induction_var", _B, "forall n m : nat, Nat.even (n * 2 + m) = Nat.even m",
     "Show that for all natural numbers n and m, 2n + m is even exactly when m is even, following the first "
     "number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction m as [|m IH].")),
    ("nat_bool", "induction_var", _B, "forall n m : nat, (n * 0 =? m) = (0 =? m)",
     "Show that for all natural numbers n and m, the test n * 0 =? m agrees with the test 0 =? m, following "
     "the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction m as [|m IH].")),
    ("nat_bool", "induction_var", _B, "forall n m : nat, (n + m <=? n) = (m <=? 0)",
     "Show that for all natural numbers n and m, the test n + m <=? n agrees with the test m <=? 0, following "
     "the first number.",
     """intros n m.
     induction n as [|n IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction m as [|m IH].")),
    ("nat_bool", "induction_var", _L, "forall n m : nat, (m + n =? m) = (n =? 0)",
     "Show that for all natural numbers n and m, the test m + n =? m agrees with the test n =? 0, following "
     "the second number.",
     """intros n m.
     induction m as [|m IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction n as [|n IH].")),
    ("nat_bool", "induction_var", _L, "forall n m : nat, (m <=? m + n) = true",
     "Show that for all natural numbers n and m, the test m <=? m + n returns true, following the second number.",
     """intros n m.
     induction m as [|m IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction n as [|n IH].")),
    ("nat_bool", "induction_var", _N, "forall a b : nat, Nat.odd (a * 2 + b) = Nat.odd b",
     "Show that for all natural numbers a and b, 2a + b is odd exactly when b is odd, tracking the variable "
     "listed first.",
     """intros a b.
     induction a as [|a IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction b as [|b IH].")),
    # ---- nat_lists
    ("nat_lists", "induction_var", _B, "forall l1 l2 : list nat, length (l1 ++ l2) = length l1 + length l2",
     "Show that for all lists l1 and l2, the length of l1 ++ l2 is the length of l1 plus the length of l2, "
     "following the first list.",
     """intros l1 l2.
     induction l1 as [|x l1 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _B, "forall l1 l2 l3 : list nat, (l1 ++ l2) ++ l3 = l1 ++ l2 ++ l3",
     "Show that for all lists l1, l2 and l3, (l1 ++ l2) ++ l3 = l1 ++ (l2 ++ l3), following the first list.",
     """intros l1 l2 l3.
     induction l1 as [|x l1 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _B, "forall l1 l2 : list nat, rev (l1 ++ l2) = rev l2 ++ rev l1",
     "Show that for all lists l1 and l2, the reverse of l1 ++ l2 is rev l2 ++ rev l1, following the first list.",
     """intros l1 l2.
     induction l1 as [|x l1 IH].
     - simpl.
     rewrite app_nil_r.
     reflexivity.
     - simpl.
     rewrite IH.
     rewrite app_assoc.
     reflexivity.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _B,
     "forall (f : nat -> nat) (l1 l2 : list nat), map f (l1 ++ l2) = map f l1 ++ map f l2",
     "Show that for every function f and all lists l1 and l2, mapping f over l1 ++ l2 gives map f l1 ++ "
     "map f l2, following the first list.",
     """intros f l1 l2.
     induction l1 as [|x l1 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _B, "forall (x : nat) (l1 l2 : list nat), In x l1 -> In x (l1 ++ l2)",
     "Show that for every x and all lists l1 and l2, if x occurs in l1 then x occurs in l1 ++ l2, following "
     "the first list.",
     """intros x l1 l2 H.
     induction l1 as [|y l1 IH].
     - destruct H.
     - simpl.
     simpl in H.
     destruct H as [H|H].
     + left.
     exact H.
     + right.
     apply IH.
     exact H.""", (1, "induction l2 as [|y l2 IH].")),
    ("nat_lists", "induction_var", _B,
     "forall l1 l2 : list nat, fold_right Nat.add 0 (l1 ++ l2) = fold_right Nat.add 0 l1 + fold_right Nat.add 0 l2",
     "Show that for all lists l1 and l2, the sum of the elements of l1 ++ l2 is the sum over l1 plus the sum "
     "over l2, following the first list.",
     """intros l1 l2.
     induction l1 as [|x l1 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     lia.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _B, "forall l1 l2 : list nat, firstn (length l1) (l1 ++ l2) = l1",
     "Show that for all lists l1 and l2, taking as many elements of l1 ++ l2 as l1 has gives l1, following the "
     "first list.",
     """intros l1 l2.
     induction l1 as [|x l1 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _B, "forall l1 l2 : list nat, skipn (length l1) (l1 ++ l2) = l2",
     "Show that for all lists l1 and l2, dropping as many elements of l1 ++ l2 as l1 has gives l2, following "
     "the first list.",
     """intros l1 l2.
     induction l1 as [|x l1 IH].
     - reflexivity.
     - simpl.
     exact IH.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _L, "forall l1 l2 : list nat, length (l2 ++ l1) = length l2 + length l1",
     "Show that for all lists l1 and l2, the length of l2 ++ l1 is the length of l2 plus the length of l1, "
     "following the second list.",
     """intros l1 l2.
     induction l2 as [|x l2 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction l1 as [|x l1 IH].")),
    ("nat_lists", "induction_var", _L, "forall l1 l2 : list nat, firstn (length l2) (l2 ++ l1) = l2",
     "Show that for all lists l1 and l2, taking as many elements of l2 ++ l1 as l2 has gives l2, following the "
     "second list.",
     """intros l1 l2.
     induction l2 as [|x l2 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     reflexivity.""", (1, "induction l1 as [|x l1 IH].")),
    ("nat_lists", "induction_var", _N,
     "forall (f : nat -> bool) (l1 l2 : list nat), filter f (l1 ++ l2) = filter f l1 ++ filter f l2",
     "Show that for every test f and all lists l1 and l2, filtering l1 ++ l2 by f gives filter f l1 ++ "
     "filter f l2, tracking the variable listed first among the lists.",
     """intros f l1 l2.
     induction l1 as [|x l1 IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     destruct (f x); reflexivity.""", (1, "induction l2 as [|x l2 IH].")),
    ("nat_lists", "induction_var", _N,
     "forall (p : nat -> bool) (xs ys : list nat), forallb p (xs ++ ys) = andb (forallb p xs) (forallb p ys)",
     "Show that for every test p and all lists xs and ys, p holds on all of xs ++ ys exactly when it holds on "
     "all of xs and on all of ys, tracking the variable listed first among the lists.",
     """intros p xs ys.
     induction xs as [|x xs IH].
     - reflexivity.
     - simpl.
     rewrite IH.
     destruct (p x); reflexivity.""", (1, "induction ys as [|y ys IH].")),
    # ---- z_numtheory (natural-number indices, integer divisibility)
    ("z_numtheory", "induction_var", _B, "forall n m : nat, (Z.of_nat m | Z.of_nat (n * m))",
     "Show that for all natural numbers n and m, the integer m divides the integer n m, following the first "
     "number.",
     """intros n m.
     induction n as [|n IH].
     - apply Z.divide_0_r.
     - simpl.
     rewrite Nat2Z.inj_add.
     apply Z.divide_add_r.
     + apply Z.divide_refl.
     + exact IH.""", (1, "induction m as [|m IH].")),
    ("z_numtheory", "induction_var", _B,
     "forall n m k : nat, (Z.of_nat k | Z.of_nat m) -> (Z.of_nat k | Z.of_nat (n * m))",
     "Show that for all natural numbers n, m and k, if k divides m as integers then k divides n m, following "
     "the first number.",
     """intros n m k H.
     induction n as [|n IH].
     - apply Z.divide_0_r.
     - simpl.
     rewrite Nat2Z.inj_add.
     apply Z.divide_add_r.
     + exact H.
     + exact IH.""", (1, "induction m as [|m IH].")),

    # ================================================================== rewrite_dir
    # ---- nat_arith
    ("nat_arith", "rewrite_dir", _B, "forall n m p q : nat, n * (m + p) = q -> n * m + n * p = q",
     "Suppose that n (m + p) = q. Show that n m + n p = q, with n m + n p written back as a single product.",
     """intros n m p q H.
     rewrite <- Nat.mul_add_distr_l.
     exact H.""", (1, "rewrite Nat.mul_add_distr_l.")),
    ("nat_arith", "rewrite_dir", _B, "forall n m p q : nat, n + (m + p) = q -> n + m + p = q",
     "Suppose that n + (m + p) = q. Show that (n + m) + p = q, with the sum written back as n + (m + p).",
     """intros n m p q H.
     rewrite <- Nat.add_assoc.
     exact H.""", (1, "rewrite Nat.add_assoc.")),
    ("nat_arith", "rewrite_dir", _B, "forall a b c : nat, a = b + c -> a * 2 = 10 -> (b + c) * 2 = 10",
     "Suppose that a = b + c and 2a = 10. Show that 2 (b + c) = 10, with b + c written back as a.",
     """intros a b c H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    ("nat_arith", "rewrite_dir", _B, "forall a b c d : nat, a * (b * c) = d -> a * b * c = d",
     "Suppose that a (b c) = d. Show that (a b) c = d, with the product written back as a (b c).",
     """intros a b c d H.
     rewrite <- Nat.mul_assoc.
     exact H.""", (1, "rewrite Nat.mul_assoc.")),
    ("nat_arith", "rewrite_dir", _B, "forall n m k : nat, n * S m = k -> n * m + n = k",
     "Suppose that n (m + 1) = k. Show that n m + n = k, with n m + n written back as a single product.",
     """intros n m k H.
     rewrite <- Nat.mul_succ_r.
     exact H.""", (1, "rewrite Nat.mul_succ_r.")),
    ("nat_arith", "rewrite_dir", _L, "forall n m p q : nat, n * m + n * p = q -> n * (m + p) = q",
     "Suppose that n m + n p = q. Show that n (m + p) = q, with the product written out as n m + n p.",
     """intros n m p q H.
     rewrite Nat.mul_add_distr_l.
     exact H.""", (1, "rewrite <- Nat.mul_add_distr_l.")),
    ("nat_arith", "rewrite_dir", _L, "forall a b c : nat, a = b + c -> (b + c) * 3 = 12 -> a * 3 = 12",
     "Suppose that a = b + c and 3 (b + c) = 12. Show that 3a = 12, with a written out as b + c.",
     """intros a b c H1 H2.
     rewrite H1.
     exact H2.""", (1, "rewrite <- H1.")),
    ("nat_arith", "rewrite_dir", _N, "forall x y z : nat, x = y * z -> x + 1 = 7 -> y * z + 1 = 7",
     "Suppose that x = y z and x + 1 = 7. Show that y z + 1 = 7, restated in terms of x.",
     """intros x y z H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    # ---- nat_bool
    ("nat_bool", "rewrite_dir", _B, "forall n m : nat, (n =? m + 1) = true -> n = m + 1",
     "Suppose that the boolean test n =? m + 1 returns true. Show that n = m + 1, with the equation written "
     "back as that boolean test.",
     """intros n m H.
     rewrite <- Nat.eqb_eq.
     exact H.""", (1, "rewrite Nat.eqb_eq.")),
    ("nat_bool", "rewrite_dir", _B, "forall n : nat, (n <=? 10) = true -> n <= 10",
     "Suppose that the boolean test n <=? 10 returns true. Show that n <= 10, with the inequality written back "
     "as that boolean test.",
     """intros n H.
     rewrite <- Nat.leb_le.
     exact H.""", (1, "rewrite Nat.leb_le.")),
    ("nat_bool", "rewrite_dir", _B,
     "forall b c : bool, b = negb c -> b || false = true -> negb c || false = true",
     "Suppose that b = negb c and that b || false is true. Show that negb c || false is true, with negb c "
     "written back as b.",
     """intros b c H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    ("nat_bool", "rewrite_dir", _L, "forall n : nat, n <= 4 -> (n <=? 4) = true",
     "Suppose that n <= 4. Show that the boolean test n <=? 4 returns true, with that test written out as the "
     "inequality.",
     """intros n H.
     rewrite Nat.leb_le.
     exact H.""", (1, "rewrite <- Nat.leb_le.")),
    ("nat_bool", "rewrite_dir", _N, "forall n m : nat, n = m * 2 -> (n =? 8) = true -> (m * 2 =? 8) = true",
     "Suppose that n = 2m and that the test n =? 8 returns true. Show that the test 2m =? 8 returns true, "
     "restated in terms of n.",
     """intros n m H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    # ---- nat_lists
    ("nat_lists", "rewrite_dir", _B, "forall l1 l2 : list nat, length (l1 ++ l2) = 5 -> length l1 + length l2 = 5",
     "Suppose that l1 ++ l2 has length 5. Show that length l1 + length l2 = 5, with the sum of the lengths "
     "written back as the length of l1 ++ l2.",
     """intros l1 l2 H.
     rewrite <- app_length.
     exact H.""", (1, "rewrite app_length.")),
    ("nat_lists", "rewrite_dir", _B,
     "forall (l1 l2 l3 : list nat) (k : nat), length (l1 ++ l2 ++ l3) = k -> length ((l1 ++ l2) ++ l3) = k",
     "Suppose that l1 ++ (l2 ++ l3) has length k. Show that (l1 ++ l2) ++ l3 has length k, with the "
     "concatenation written back as l1 ++ (l2 ++ l3).",
     """intros l1 l2 l3 k H.
     rewrite <- app_assoc.
     exact H.""", (1, "rewrite app_assoc.")),
    ("nat_lists", "rewrite_dir", _B, "forall l1 l2 : list nat, rev (l1 ++ l2) = [1; 2] -> rev l2 ++ rev l1 = [1; 2]",
     "Suppose that the reverse of l1 ++ l2 is [1; 2]. Show that rev l2 ++ rev l1 = [1; 2], with rev l2 ++ "
     "rev l1 written back as the reverse of l1 ++ l2.",
     """intros l1 l2 H.
     rewrite <- rev_app_distr.
     exact H.""", (1, "rewrite rev_app_distr.")),
    ("nat_lists", "rewrite_dir", _B,
     "forall (f : nat -> nat) (l1 l2 l3 : list nat), map f (l1 ++ l2) = l3 -> map f l1 ++ map f l2 = l3",
     "Suppose that mapping f over l1 ++ l2 gives l3. Show that map f l1 ++ map f l2 = l3, with map f l1 ++ "
     "map f l2 written back as a single map.",
     """intros f l1 l2 l3 H.
     rewrite <- map_app.
     exact H.""", (1, "rewrite map_app.")),
    ("nat_lists", "rewrite_dir", _B, "forall l l1 l2 : list nat, l = l1 ++ l2 -> length l = 3 -> length (l1 ++ l2) = 3",
     "Suppose that l = l1 ++ l2 and that l has length 3. Show that l1 ++ l2 has length 3, with l1 ++ l2 "
     "written back as l.",
     """intros l l1 l2 H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    ("nat_lists", "rewrite_dir", _L, "forall l1 l2 : list nat, length l1 + length l2 = 4 -> length (l1 ++ l2) = 4",
     "Suppose that length l1 + length l2 = 4. Show that l1 ++ l2 has length 4, with that length written out as "
     "the sum of the lengths.",
     """intros l1 l2 H.
     rewrite app_length.
     exact H.""", (1, "rewrite <- app_length.")),
    ("nat_lists", "rewrite_dir", _L, "forall l1 l2 : list nat, rev l2 ++ rev l1 = [3] -> rev (l1 ++ l2) = [3]",
     "Suppose that rev l2 ++ rev l1 = [3]. Show that the reverse of l1 ++ l2 is [3], with that reverse written "
     "out as rev l2 ++ rev l1.",
     """intros l1 l2 H.
     rewrite rev_app_distr.
     exact H.""", (1, "rewrite <- rev_app_distr.")),
    ("nat_lists", "rewrite_dir", _N, "forall l1 m : list nat, m = rev l1 -> length m = 2 -> length (rev l1) = 2",
     "Suppose that m = rev l1 and that m has length 2. Show that rev l1 has length 2, restated in terms of m.",
     """intros l1 m H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    # ---- z_arith
    ("z_arith", "rewrite_dir", _B, "forall a b c d : Z, a * (b + c) = d -> a * b + a * c = d",
     "Suppose that a (b + c) = d for integers a, b, c, d. Show that a b + a c = d, with a b + a c written back "
     "as a single product.",
     """intros a b c d H.
     rewrite <- Z.mul_add_distr_l.
     exact H.""", (1, "rewrite Z.mul_add_distr_l.")),
    ("z_arith", "rewrite_dir", _B, "forall a b c d : Z, (a + b) * c = d -> a * c + b * c = d",
     "Suppose that (a + b) c = d for integers a, b, c, d. Show that a c + b c = d, with a c + b c written back "
     "as a single product.",
     """intros a b c d H.
     rewrite <- Z.mul_add_distr_r.
     exact H.""", (1, "rewrite Z.mul_add_distr_r.")),
    ("z_arith", "rewrite_dir", _B, "forall a b c : Z, a + (b + c) = 0 -> a + b + c = 0",
     "Suppose that a + (b + c) = 0 for integers a, b, c. Show that (a + b) + c = 0, with the sum written back "
     "as a + (b + c).",
     """intros a b c H.
     rewrite <- Z.add_assoc.
     exact H.""", (1, "rewrite Z.add_assoc.")),
    ("z_arith", "rewrite_dir", _B, "forall x y : Z, x = y - 1 -> x * x = 4 -> (y - 1) * (y - 1) = 4",
     "Suppose that x = y - 1 and x^2 = 4 for integers x and y. Show that (y - 1)^2 = 4, with y - 1 written back "
     "as x.",
     """intros x y H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    ("z_arith", "rewrite_dir", _B, "forall a : Z, a ^ 2 = 9 -> a * a = 9",
     "Suppose that a^2 = 9 for an integer a. Show that a a = 9, with a a written back as a square.",
     """intros a H.
     rewrite <- Z.pow_2_r.
     exact H.""", (1, "rewrite Z.pow_2_r.")),
    ("z_arith", "rewrite_dir", _L, "forall a b c d : Z, a * b + a * c = d -> a * (b + c) = d",
     "Suppose that a b + a c = d for integers a, b, c, d. Show that a (b + c) = d, with the product written out "
     "as a b + a c.",
     """intros a b c d H.
     rewrite Z.mul_add_distr_l.
     exact H.""", (1, "rewrite <- Z.mul_add_distr_l.")),
    ("z_arith", "rewrite_dir", _N, "forall x y : Z, x = 2 * y -> x + 3 = 11 -> 2 * y + 3 = 11",
     "Suppose that x = 2y and x + 3 = 11 for integers x and y. Show that 2y + 3 = 11, restated in terms of x.",
     """intros x y H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    # ---- z_numtheory
    ("z_numtheory", "rewrite_dir", _B, "forall a b c : Z, (a | b * (c + 1)) -> (a | b * c + b * 1)",
     "Suppose that a divides b (c + 1). Show that a divides b c + b * 1, with b c + b * 1 written back as a "
     "single product.",
     """intros a b c H.
     rewrite <- Z.mul_add_distr_l.
     exact H.""", (1, "rewrite Z.mul_add_distr_l.")),
    ("z_numtheory", "rewrite_dir", _B, "forall a b : Z, (a | b ^ 2) -> (a | b * b)",
     "Suppose that a divides b^2. Show that a divides b b, with b b written back as a square.",
     """intros a b H.
     rewrite <- Z.pow_2_r.
     exact H.""", (1, "rewrite Z.pow_2_r.")),
    ("z_numtheory", "rewrite_dir", _B,
     "forall n k : Z, n = 2 * k + 1 -> n mod 2 = 1 -> (2 * k + 1) mod 2 = 1",
     "Suppose that n = 2k + 1 and that n leaves remainder 1 modulo 2. Show that 2k + 1 leaves remainder 1 "
     "modulo 2, with 2k + 1 written back as n.",
     """intros n k H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),
    ("z_numtheory", "rewrite_dir", _B, "forall a b c : Z, (a | b + (c + 4)) -> (a | b + c + 4)",
     "Suppose that a divides b + (c + 4). Show that a divides (b + c) + 4, with the sum written back as "
     "b + (c + 4).",
     """intros a b c H.
     rewrite <- Z.add_assoc.
     exact H.""", (1, "rewrite Z.add_assoc.")),
    ("z_numtheory", "rewrite_dir", _L, "forall a b c : Z, (a | b * c + b * 2) -> (a | b * (c + 2))",
     "Suppose that a divides b c + 2b. Show that a divides b (c + 2), with the product written out as "
     "b c + 2b.",
     """intros a b c H.
     rewrite Z.mul_add_distr_l.
     exact H.""", (1, "rewrite <- Z.mul_add_distr_l.")),
    ("z_numtheory", "rewrite_dir", _N, "forall p m : Z, p = m * m -> (3 | p) -> (3 | m * m)",
     "Suppose that p = m^2 and that 3 divides p. Show that 3 divides m m, restated in terms of p.",
     """intros p m H1 H2.
     rewrite <- H1.
     exact H2.""", (1, "rewrite H1.")),

    # ================================================================== wrong_lemma
    # ---- nat_arith
    ("nat_arith", "wrong_lemma", _B, "forall a b c : nat, a + b = c -> b + a = c",
     "Suppose that a + b = c for natural numbers a, b, c. Show that the sum b + a equals c.",
     """intros a b c H.
     rewrite Nat.add_comm.
     exact H.""", (1, "rewrite Nat.mul_comm.")),
    ("nat_arith", "wrong_lemma", _B, "forall a b c d : nat, a + b + c = d -> a + (b + c) = d",
     "Suppose that (a + b) + c = d for natural numbers a, b, c, d. Show that the sum a + (b + c) equals d.",
     """intros a b c d H.
     rewrite Nat.add_assoc.
     exact H.""", (1, "rewrite Nat.mul_assoc.")),
    ("nat_arith", "wrong_lemma", _B, "forall a b c : nat, a <= b -> b <= c -> a <= c",
     "Suppose that a is at most b and b is at most c. Show that a is at most c.",
     """intros a b c H1 H2.
     apply Nat.le_trans with (m := b).
     - exact H1.
     - exact H2.""", (1, "apply Nat.lt_trans with (m := b).")),
    ("nat_arith", "wrong_lemma", _B, "forall n m : nat, n + m - m = n",
     "Show that for all natural numbers n and m, the sum n + m minus m gives back n.",
     """intros n m.
     apply Nat.add_sub.""", (1, "apply Nat.sub_add.")),
    ("nat_arith", "wrong_lemma", _B, "forall a b : nat, (a + b) * 2 = (b + a) * 2",
     "Show that for all natural numbers a and b, twice the sum a + b equals twice the sum b + a.",
     """intros a b.
     rewrite (Nat.add_comm a b).
     reflexivity.""", (1, "rewrite (Nat.add_comm_r a b).")),
    ("nat_arith", "wrong_lemma", _L, "forall a b c : nat, a * b = c -> b * a = c",
     "Suppose that a b = c for natural numbers a, b, c. Show that the product b a equals c.",
     """intros a b c H.
     rewrite Nat.mul_comm.
     exact H.""", (1, "rewrite Nat.add_comm.")),
    ("nat_arith", "wrong_lemma", _L, "forall a b c d : nat, a * b * c = d -> a * (b * c) = d",
     "Suppose that (a b) c = d for natural numbers a, b, c, d. Show that the product a (b c) equals d.",
     """intros a b c d H.
     rewrite Nat.mul_assoc.
     exact H.""", (1, "rewrite Nat.add_assoc.")),
    ("nat_arith", "wrong_lemma", _N, "forall x y : nat, x + y + 1 = y + x + 1",
     "Show that for all natural numbers x and y, adding 1 to the total of x and y gives the same as adding 1 "
     "to the total of y and x.",
     """intros x y.
     rewrite (Nat.add_comm x y).
     reflexivity.""", (1, "rewrite (Nat.mul_comm x y).")),
    # ---- nat_bool
    ("nat_bool", "wrong_lemma", _B, "forall b c : bool, b && c = true -> c && b = true",
     "Suppose that the conjunction b && c is true. Show that the conjunction c && b is true.",
     """intros b c H.
     rewrite andb_comm.
     exact H.""", (1, "rewrite orb_comm.")),
    ("nat_bool", "wrong_lemma", _B, "forall b c : bool, negb b || negb c = true -> negb (b && c) = true",
     "Suppose that negb b || negb c is true. Show that the negation of the conjunction b && c is true.",
     """intros b c H.
     rewrite negb_andb.
     exact H.""", (1, "rewrite negb_orb.")),
    ("nat_bool", "wrong_lemma", _B, "forall n : nat, (n =? 5) = true -> n + 1 = 6",
     "Suppose that the equality test n =? 5 returns true. Show that n + 1 = 6.",
     """intros n H.
     apply Nat.eqb_eq in H.
     rewrite H.
     reflexivity.""", (1, "apply Nat.leb_le in H.")),
    ("nat_bool", "wrong_lemma", _B, "forall b c : bool, b && c = true -> b = true",
     "Suppose that the conjunction b && c is true. Show that b is true.",
     """intros b c H.
     apply andb_true_iff in H.
     destruct H as [H1 H2].
     exact H1.""", (1, "apply orb_true_iff in H.")),
    ("nat_bool", "wrong_lemma", _L, "forall b c : bool, b || c = true -> c || b = true",
     "Suppose that the disjunction b || c is true. Show that the disjunction c || b is true.",
     """intros b c H.
     rewrite orb_comm.
     exact H.""", (1, "rewrite andb_comm.")),
    ("nat_bool", "wrong_lemma", _N, "forall p q : bool, p && q = q && p",
     "Show that for booleans p and q, requiring both p and q is the same as requiring both q and p.",
     """intros p q.
     apply andb_comm.""", (1, "apply orb_comm.")),
    # ---- nat_lists
    ("nat_lists", "wrong_lemma", _B, "forall l1 l2 : list nat, length (l1 ++ l2) = length l2 + length l1",
     "Show that for all lists l1 and l2, the length of the concatenation l1 ++ l2 equals length l2 + length l1.",
     """intros l1 l2.
     rewrite app_length.
     apply Nat.add_comm.""", (1, "rewrite rev_length.")),
    ("nat_lists", "wrong_lemma", _B, "forall l1 l2 l3 : list nat, l1 ++ l2 ++ l3 = (l1 ++ l2) ++ l3",
     "Show that for all lists l1, l2, l3, the concatenation of l1 with l2 ++ l3 is the concatenation of "
     "l1 ++ l2 with l3.",
     """intros l1 l2 l3.
     apply app_assoc.""", (1, "apply app_nil_r.")),
    ("nat_lists", "wrong_lemma", _B, "forall (l : list nat) (x : nat), rev (l ++ [x]) = x :: rev l",
     "Show that for every list l and element x, reversing the concatenation l ++ [x] puts x in front of rev l.",
     """intros l x.
     rewrite rev_app_distr.
     reflexivity.""", (1, "rewrite rev_involutive.")),
    ("nat_lists", "wrong_lemma", _B, "forall (f : nat -> nat) (l : list nat), length (map f l) = length l",
     "Show that for every function f and list l, mapping f over l keeps the length of l.",
     """intros f l.
     apply map_length.""", (1, "apply rev_length.")),
    ("nat_lists", "wrong_lemma", _B, "forall (x : nat) (l1 l2 : list nat), In x l2 -> In x (l1 ++ l2)",
     "Show that if x occurs in the list l2 then x occurs in the concatenation l1 ++ l2.",
     """intros x l1 l2 H.
     apply in_or_app.
     right.
     exact H.""", (1, "apply in_app_or.")),
    ("nat_lists", "wrong_lemma", _L, "forall l1 l2 : list nat, length (rev l1) + length l2 = length l1 + length l2",
     "Show that for all lists l1 and l2, the length of the reversal of l1 plus the length of l2 equals "
     "length l1 + length l2.",
     """intros l1 l2.
     rewrite rev_length.
     reflexivity.""", (1, "rewrite app_length.")),
    ("nat_lists", "wrong_lemma", _L, "forall (l : list nat) (x : nat), rev (rev (x :: l)) = x :: l",
     "Show that for every list l and element x, reversing twice the list x :: l gives x :: l back.",
     """intros l x.
     rewrite rev_involutive.
     reflexivity.""", (1, "rewrite rev_app_distr.")),
    ("nat_lists", "wrong_lemma", _N, "forall xs ys : list nat, length (xs ++ ys ++ xs) = 2 * length xs + length ys",
     "Show that joining the lists xs, ys and xs again gives a list whose size is twice that of xs plus that of "
     "ys.",
     """intros xs ys.
     rewrite app_length.
     rewrite app_length.
     lia.""", (1, "rewrite rev_length.")),
    # ---- z_arith
    ("z_arith", "wrong_lemma", _B, "forall a b c : Z, a + b = c -> b + a = c",
     "Suppose that a + b = c for integers a, b, c. Show that the sum b + a equals c.",
     """intros a b c H.
     rewrite Z.add_comm.
     exact H.""", (1, "rewrite Z.mul_comm.")),
    ("z_arith", "wrong_lemma", _B, "forall a b c : Z, a * (b + c) = a * b + a * c",
     "Show that for integers a, b, c, multiplying the sum b + c on the left by a gives a b + a c.",
     """intros a b c.
     apply Z.mul_add_distr_l.""", (1, "apply Z.mul_add_distr_r.")),
    ("z_arith", "wrong_lemma", _B, "forall a b : Z, Z.abs (a * b) = Z.abs a * Z.abs b",
     "Show that for integers a and b, the absolute value of a product a b is |a| |b|.",
     """intros a b.
     apply Z.abs_mul.""", (1, "apply Z.abs_triangle.")),
    ("z_arith", "wrong_lemma", _B, "forall a b c : Z, a + b + c = a + (b + c)",
     "Show that for integers a, b, c, the sum (a + b) + c equals the sum a + (b + c).",
     """intros a b c.
     rewrite Z.add_assoc.
     reflexivity.""", (1, "rewrite Z.mul_assoc.")),
    ("z_arith", "wrong_lemma", _L, "forall a b c : Z, (a + b) * c = a * c + b * c",
     "Show that for integers a, b, c, multiplying the sum a + b on the right by c gives a c + b c.",
     """intros a b c.
     apply Z.mul_add_distr_r.""", (1, "apply Z.mul_add_distr_l.")),
    ("z_arith", "wrong_lemma", _N, "forall x y : Z, x + y - 1 = y + x - 1",
     "Show that for integers x and y, the total of x and y minus 1 equals the total of y and x minus 1.",
     """intros x y.
     rewrite (Z.add_comm x y).
     reflexivity.""", (1, "rewrite (Z.mul_comm x y).")),
    # ---- z_numtheory
    ("z_numtheory", "wrong_lemma", _B, "forall a b c : Z, (a | b) -> (a | b * c)",
     "Suppose that a divides b. Show that a divides the product b c through its first factor.",
     """intros a b c H.
     apply Z.divide_mul_l.
     exact H.""", (1, "apply Z.divide_mul_r.")),
    ("z_numtheory", "wrong_lemma", _B, "forall a b c : Z, (a | b) -> (a | c) -> (a | b - c)",
     "Suppose that a divides both b and c. Show that a divides their difference b - c.",
     """intros a b c H1 H2.
     apply Z.divide_sub_r.
     - exact H1.
     - exact H2.""", (1, "apply Z.divide_add_r.")),
    ("z_numtheory", "wrong_lemma", _B, "forall a : Z, (a | 0)",
     "Show that every integer a divides 0.",
     """intros a.
     apply Z.divide_0_r.""", (1, "apply Z.divide_0_l.")),
    ("z_numtheory", "wrong_lemma", _B, "forall a b : Z, (a | b) -> (- a | b)",
     "Suppose that a divides b. Show that the negated divisor -a also divides b.",
     """intros a b H.
     apply Z.divide_opp_l.
     exact H.""", (1, "apply Z.divide_opp_r.")),
    ("z_numtheory", "wrong_lemma", _L, "forall a b c : Z, (a | c) -> (a | b * c)",
     "Suppose that a divides c. Show that a divides the product b c through its second factor.",
     """intros a b c H.
     apply Z.divide_mul_r.
     exact H.""", (1, "apply Z.divide_mul_l.")),
    ("z_numtheory", "wrong_lemma", _N, "forall p q r : Z, (p | q) -> (p | q * r * r)",
     "Given that p divides q, show that p divides q r r through its leading factor q.",
     """intros p q r H.
     apply Z.divide_mul_l.
     apply Z.divide_mul_l.
     exact H.""", (1, "apply Z.divide_mul_r.")),

    # ================================================================== lia_nia
    # ---- nat_arith
    ("nat_arith", "lia_nia", _B, "forall n m : nat, n <= m -> n * n <= m * m",
     "Suppose that n <= m for natural numbers n and m. Show that the product n n is at most the product m m.",
     """intros n m H.
     nia.""", (1, "lia.")),
    ("nat_arith", "lia_nia", _B, "forall n m : nat, 1 <= m -> n <= n * m",
     "Suppose that m >= 1. Show that the natural number n is at most the product n m.",
     """intros n m H.
     nia.""", (1, "lia.")),
    ("nat_arith", "lia_nia", _B, "forall a b c : nat, a <= b -> a * c <= b * c",
     "Suppose that a <= b for natural numbers a, b, c. Show that the product a c is at most the product b c.",
     """intros a b c H.
     nia.""", (1, "lia.")),
    ("nat_arith", "lia_nia", _B, "forall n : nat, 2 <= n -> 2 * n <= n * n",
     "Suppose that n >= 2. Show that the product n n is at least 2n.",
     """intros n H.
     nia.""", (1, "lia.")),
    ("nat_arith", "lia_nia", _B, "forall n : nat, 3 <= n -> 2 * n + 1 < n * n",
     "Suppose that n >= 3. Show that 2n + 1 is less than the product n n.",
     """intros n H.
     nia.""", (1, "lia.")),
    ("nat_arith", "lia_nia", _B, "forall x y : nat, x <= 3 -> y <= 4 -> x * y <= 12",
     "Suppose that x <= 3 and y <= 4 for natural numbers x and y. Show that the product x y is at most 12.",
     """intros x y Hx Hy.
     nia.""", (1, "lia.")),
    ("nat_arith", "lia_nia", _B, "forall n m : nat, n < m -> n * n < m * m",
     "Suppose that n < m for natural numbers n and m. Show that the product n n is less than the product m m.",
     """intros n m H.
     nia.""", (1, "lia.")),
    ("nat_arith", "lia_nia", _L, "forall n m : nat, n <= m -> 3 * n <= 3 * m",
     "Suppose that n <= m for natural numbers n and m. Show that 3n, a constant multiple of n, is at most the "
     "same multiple 3m of m.",
     """intros n m H.
     lia.""", (1, "ring.")),
    ("nat_arith", "lia_nia", _L, "forall x y : nat, x = 2 * y -> x + y = 3 * y",
     "Suppose that x is a constant multiple of y, namely x = 2y. Show that x + y = 3y.",
     """intros x y H.
     lia.""", (1, "ring.")),
    ("nat_arith", "lia_nia", _N, "forall n : nat, n <= n * n",
     "Show that every natural number n is at most the square of n.",
     """intros n.
     nia.""", (1, "lia.")),
    # ---- nat_lists
    ("nat_lists", "lia_nia", _B,
     "forall l1 l2 : list nat, length l1 <= length l2 -> length l1 * length l1 <= length l2 * length l2",
     "Suppose that the list l1 is no longer than l2. Show that the product of the length of l1 with itself is "
     "at most the product of the length of l2 with itself.",
     """intros l1 l2 H.
     nia.""", (1, "lia.")),
    ("nat_lists", "lia_nia", _B,
     "forall l : list nat, 1 <= length l -> length l <= length l * length (l ++ l)",
     "Suppose that the list l is not empty. Show that its length is at most the product of its length with the "
     "length of l ++ l.",
     """intros l H.
     rewrite app_length.
     nia.""", (2, "lia.")),
    ("nat_lists", "lia_nia", _B,
     "forall l1 l2 : list nat, length l1 <= 3 -> length l2 <= 2 -> length l1 * length l2 <= 6",
     "Suppose that the list l1 has at most 3 elements and l2 at most 2. Show that the product of their lengths "
     "is at most 6.",
     """intros l1 l2 H1 H2.
     nia.""", (1, "lia.")),
    ("nat_lists", "lia_nia", _L,
     "forall l1 l2 : list nat, length l1 <= length l2 -> 2 * length l1 <= length (l2 ++ l2)",
     "Suppose that the list l1 is no longer than l2. Show that a constant multiple of the length of l1, twice "
     "it, is at most the length of l2 ++ l2.",
     """intros l1 l2 H.
     rewrite app_length.
     lia.""", (2, "ring.")),
    ("nat_lists", "lia_nia", _N, "forall l : list nat, length l <= length l * length l",
     "Show that the length of every list l is at most the square of its length.",
     """intros l.
     nia.""", (1, "lia.")),
    # ---- z_arith
    ("z_arith", "lia_nia", _B, "forall a : Z, 0 <= a * a",
     "Show that for every integer a, the product a a is nonnegative.",
     """intros a.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _B, "forall a b : Z, 0 <= a -> a <= b -> a * a <= b * b",
     "Suppose that 0 <= a <= b for integers a and b. Show that the product a a is at most the product b b.",
     """intros a b Ha Hab.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _B, "forall a b c : Z, 0 <= a -> b <= c -> a * b <= a * c",
     "Suppose that a >= 0 and b <= c for integers a, b, c. Show that the product a b is at most the product a c.",
     """intros a b c Ha Hbc.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _B, "forall a b : Z, 1 < a -> 1 < b -> a + b <= a * b + 1",
     "Suppose that the integers a and b are both greater than 1. Show that a + b is at most the product a b "
     "plus 1.",
     """intros a b Ha Hb.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _B, "forall x : Z, x * x = 9 -> 0 <= x -> x = 3",
     "Suppose that the product x x is 9 and x >= 0 for an integer x. Show that x = 3.",
     """intros x H Hx.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _B, "forall x : Z, 0 <= x -> x <= x * x + 1",
     "Suppose that the integer x is nonnegative. Show that x is at most the product x x plus 1.",
     """intros x Hx.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _B, "forall n : Z, 0 <= n * (n + 1)",
     "Show that for every integer n, the product n (n + 1) is nonnegative.",
     """intros n.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _L, "forall x y : Z, 2 * x + 3 * y = 12 -> y = 2 -> x = 3",
     "Suppose that 2x plus 3y equals 12 for integers x and y, each term a constant multiple of one unknown, "
     "and that y = 2. Show that x = 3.",
     """intros x y H Hy.
     lia.""", (1, "ring.")),
    ("z_arith", "lia_nia", _L, "forall a b : Z, a <= b -> 5 * a - 2 <= 5 * b - 2",
     "Suppose that a <= b for integers a and b. Show that 5a - 2, a constant multiple of a minus 2, is at most "
     "5b - 2.",
     """intros a b H.
     lia.""", (1, "ring.")),
    ("z_arith", "lia_nia", _N, "forall a b : Z, 0 <= (a - b) ^ 2",
     "Show that for all integers a and b, the square of a - b is nonnegative.",
     """intros a b.
     nia.""", (1, "lia.")),
    ("z_arith", "lia_nia", _N, "forall x : Z, x ^ 2 = 4 -> x = 2 \\/ x = -2",
     "Suppose that the square of the integer x is 4. Show that x = 2 or x = -2.",
     """intros x H.
     nia.""", (1, "lia.")),
    # ---- z_numtheory
    ("z_numtheory", "lia_nia", _B, "forall m n : Z, 0 < m -> 0 < n -> m * n = m -> n = 1",
     "Suppose that m and n are positive integers and the product m n equals m. Show that n = 1.",
     """intros m n Hm Hn H.
     nia.""", (1, "lia.")),
    ("z_numtheory", "lia_nia", _B, "forall x y : Z, 0 < x -> x * y = x * 3 -> y = 3",
     "Suppose that x is a positive integer and the product x y equals the product 3x. Show that y = 3.",
     """intros x y Hx H.
     nia.""", (1, "lia.")),
    ("z_numtheory", "lia_nia", _B, "forall a b : Z, 0 < a -> 0 < b -> (a | b) -> a <= b",
     "Suppose that a and b are positive integers and a divides b, so that b is the product of some integer k "
     "with a. Show that a <= b.",
     """intros a b Ha Hb [k Hk].
     assert (Hk1 : 0 < k) by lia.
     nia.""", (2, "lia.")),
    ("z_numtheory", "lia_nia", _B, "forall n k : Z, 0 < n -> 1 < k -> n < k * n",
     "Suppose that n is a positive integer and k > 1. Show that n is less than the product k n, a multiple "
     "of n.",
     """intros n k Hn Hk.
     nia.""", (1, "lia.")),
    ("z_numtheory", "lia_nia", _B, "forall a b : Z, 0 <= a -> 0 <= b -> a * a <= b * b -> a <= b",
     "Suppose that a and b are nonnegative integers and the product a a is at most the product b b. Show that "
     "a <= b.",
     """intros a b Ha Hb H.
     nia.""", (1, "lia.")),
    ("z_numtheory", "lia_nia", _L, "forall x : Z, (3 | x) -> (3 | x + 6)",
     "Suppose that 3 divides the integer x, so that x is a constant multiple of 3. Show that 3 divides x + 6.",
     """intros x [k Hk].
     exists (k + 2).
     lia.""", (2, "ring.")),
    ("z_numtheory", "lia_nia", _L, "forall n : Z, (5 | n) -> (5 | 2 * n + 15)",
     "Suppose that 5 divides the integer n, so that n is a constant multiple of 5. Show that 5 divides 2n + 15.",
     """intros n [k Hk].
     exists (2 * k + 3).
     lia.""", (2, "ring.")),
    ("z_numtheory", "lia_nia", _N, "forall a b : Z, a ^ 2 = b ^ 2 -> 0 <= a -> 0 <= b -> a = b",
     "Suppose that the nonnegative integers a and b have equal squares: the square of a is the square of b. "
     "Show that a = b.",
     """intros a b H Ha Hb.
     nia.""", (1, "lia.")),

    # ================================================================== forgotten_case
    # ---- nat_bool
    ("nat_bool", "forgotten_case", _B, "forall b : bool, negb (negb b) = b",
     "Show that negating a boolean b twice gives b back, depending on whether b is true or false.",
     """intros b.
     destruct b.
     - reflexivity.
     - reflexivity.""", (1, None)),
    ("nat_bool", "forgotten_case", _B, "forall b c : bool, b && c = c && b",
     "Show that for booleans b and c, b && c = c && b, depending on whether b and c are true or false.",
     """intros b c.
     destruct b, c.
     - reflexivity.
     - reflexivity.
     - reflexivity.
     - reflexivity.""", (1, None)),
    ("nat_bool", "forgotten_case", _B, "forall b : bool, (if b then 1 else 0) <= 1",
     "Show that the number that is 1 when b holds and 0 otherwise is at most 1, depending on whether b is true "
     "or false.",
     """intros b.
     destruct b.
     - lia.
     - lia.""", (1, None)),
    ("nat_bool", "forgotten_case", _B, "forall b : bool, b = true \\/ b = false",
     "Show that every boolean b is true or false, depending on which value b has.",
     """intros b.
     destruct b.
     - left.
     reflexivity.
     - right.
     reflexivity.""", (1, None)),
    ("nat_bool", "forgotten_case", _B, "forall b : bool, b = negb b -> False",
     "Show that no boolean b equals its own negation, depending on whether b is true or false.",
     """intros b H.
     destruct b.
     - discriminate H.
     - discriminate H.""", (1, None)),
    ("nat_bool", "forgotten_case", _B, "forall n : nat, (0 <? n) = negb (n =? 0)",
     "Show that for every natural number n, the test 0 <? n is the negation of the test n =? 0, depending on "
     "whether n is zero or a successor.",
     """intros n.
     destruct n as [|n'].
     - reflexivity.
     - reflexivity.""", (1, None)),
    ("nat_bool", "forgotten_case", _L, "forall b : bool, b && false = false",
     "Show that b && false is false for every boolean b, regardless of whether b is true or false.",
     """intros b.
     rewrite andb_false_r.
     reflexivity.""", (1, "destruct b.")),
    ("nat_bool", "forgotten_case", _L, "forall b : bool, b || true = true",
     "Show that b || true is true for every boolean b, regardless of whether b is true or false.",
     """intros b.
     rewrite orb_true_r.
     reflexivity.""", (1, "destruct b.")),
    ("nat_bool", "forgotten_case", _L, "forall b c : bool, b && c || false = b && c",
     "Show that (b && c) || false = b && c for booleans b and c, regardless of whether b is true or false.",
     """intros b c.
     rewrite orb_false_r.
     reflexivity.""", (1, "destruct b.")),
    ("nat_bool", "forgotten_case", _N, "forall b c : bool, b || c = false -> c = false",
     "Suppose that b || c is false. Show that c is false, considering both possible values of c.",
     """intros b c H.
     destruct c.
     - rewrite orb_true_r in H.
     discriminate H.
     - reflexivity.""", (1, None)),
    ("nat_bool", "forgotten_case", _N, "forall b : bool, (if b then 2 else 2) = 2",
     "Show that the number that is 2 when b holds and 2 otherwise equals 2, considering both possible values "
     "of b.",
     """intros b.
     destruct b.
     - reflexivity.
     - reflexivity.""", (1, None)),
    # ---- nat_arith
    ("nat_arith", "forgotten_case", _B, "forall n : nat, n = 0 \\/ exists m, n = S m",
     "Show that every natural number n is 0 or the successor of some m, depending on whether n is zero or a "
     "successor.",
     """intros n.
     destruct n as [|m].
     - left.
     reflexivity.
     - right.
     exists m.
     reflexivity.""", (1, None)),
    ("nat_arith", "forgotten_case", _B, "forall n : nat, Nat.pred n <= n",
     "Show that the predecessor of a natural number n is at most n, depending on whether n is zero or a "
     "successor.",
     """intros n.
     destruct n as [|m].
     - apply le_n.
     - simpl.
     apply Nat.le_succ_diag_r.""", (1, None)),
    ("nat_arith", "forgotten_case", _B, "forall n : nat, n * n = 0 -> n = 0",
     "Show that if n n = 0 for a natural number n then n = 0, depending on whether n is zero or a successor.",
     """intros n H.
     destruct n as [|m].
     - reflexivity.
     - discriminate H.""", (1, None)),
    ("nat_arith", "forgotten_case", _B, "forall n : nat, 0 < n -> S (Nat.pred n) = n",
     "Show that if 0 < n then the successor of the predecessor of n is n, depending on whether n is zero or a "
     "successor.",
     """intros n H.
     destruct n as [|m].
     - destruct (Nat.lt_irrefl 0 H).
     - reflexivity.""", (1, None)),
    ("nat_arith", "forgotten_case", _B, "forall n m : nat, Nat.min n m <= n",
     "Show that the minimum of natural numbers n and m is at most n, depending on whether n <= m or m <= n.",
     """intros n m.
     destruct (Nat.le_ge_cases n m) as [H|H].
     - rewrite Nat.min_l.
     + apply le_n.
     + exact H.
     - rewrite Nat.min_r.
     + exact H.
     + exact H.""", (1, None)),
    ("nat_arith", "forgotten_case", _L, "forall n : nat, n + 0 = n",
     "Show that n + 0 = n for every natural number n, regardless of whether n is zero or a successor.",
     """intros n.
     rewrite Nat.add_0_r.
     reflexivity.""", (1, "destruct n as [|n'].")),
    ("nat_arith", "forgotten_case", _L, "forall n : nat, n * 1 = n",
     "Show that n * 1 = n for every natural number n, regardless of whether n is zero or a successor.",
     """intros n.
     rewrite Nat.mul_1_r.
     reflexivity.""", (1, "destruct n as [|n'].")),
    ("nat_arith", "forgotten_case", _N, "forall n : nat, n = 0 \\/ 0 < n",
     "Show that every natural number n is 0 or positive, considering both possible forms of n.",
     """intros n.
     destruct n as [|m].
     - left.
     reflexivity.
     - right.
     apply Nat.lt_0_succ.""", (1, None)),
    # ---- nat_lists
    ("nat_lists", "forgotten_case", _B, "forall l : list nat, l = [] \\/ exists x t, l = x :: t",
     "Show that every list l is empty or has a head x and a tail t, depending on whether l is empty or not.",
     """intros l.
     destruct l as [|x t].
     - left.
     reflexivity.
     - right.
     exists x, t.
     reflexivity.""", (1, None)),
    ("nat_lists", "forgotten_case", _B, "forall l : list nat, length l = 0 -> l = []",
     "Show that a list l of length 0 is the empty list, depending on whether l is empty or not.",
     """intros l H.
     destruct l as [|x t].
     - reflexivity.
     - discriminate H.""", (1, None)),
    ("nat_lists", "forgotten_case", _B, "forall l : list nat, hd 0 l :: tl l = l \\/ l = []",
     "Show that a list l is its head (with default 0) followed by its tail, or else empty, depending on whether "
     "l is empty or not.",
     """intros l.
     destruct l as [|x t].
     - right.
     reflexivity.
     - left.
     reflexivity.""", (1, None)),
    ("nat_lists", "forgotten_case", _B, "forall l : list nat, length (tl l) = length l - 1",
     "Show that the tail of a list l is one element shorter than l (or empty), depending on whether l is empty "
     "or not.",
     """intros l.
     destruct l as [|x t].
     - reflexivity.
     - simpl.
     lia.""", (1, None)),
    ("nat_lists", "forgotten_case", _B, "forall (l : list nat) (x : nat), In x l -> l <> []",
     "Show that a list l that contains some x is not empty, depending on whether l is empty or not.",
     """intros l x H.
     destruct l as [|y t].
     - destruct H.
     - discriminate.""", (1, None)),
    ("nat_lists", "forgotten_case", _L, "forall l : list nat, l ++ [] = l",
     "Show that appending the empty list to l gives l, regardless of whether l is empty or not.",
     """intros l.
     rewrite app_nil_r.
     reflexivity.""", (1, "destruct l as [|x t].")),
    ("nat_lists", "forgotten_case", _N, "forall l : list nat, length l = 0 \\/ 0 < length l",
     "Show that the length of a list l is 0 or positive, considering both possible forms of l.",
     """intros l.
     destruct l as [|x t].
     - left.
     reflexivity.
     - right.
     simpl.
     lia.""", (1, None)),
    # ---- z_arith
    ("z_arith", "forgotten_case", _B, "forall x : Z, Z.abs x = x \\/ Z.abs x = - x",
     "Show that |x| = x or |x| = -x for every integer x, depending on the sign of x.",
     """intros x.
     destruct (Z.le_gt_cases 0 x) as [H|H].
     - left.
     apply Z.abs_eq.
     exact H.
     - right.
     apply Z.abs_neq.
     lia.""", (1, None)),
    ("z_arith", "forgotten_case", _B, "forall x : Z, Z.abs x * Z.abs x = x * x",
     "Show that |x| |x| = x x for every integer x, depending on the sign of x.",
     """intros x.
     destruct (Z.le_gt_cases 0 x) as [H|H].
     - rewrite (Z.abs_eq x H).
     reflexivity.
     - rewrite (Z.abs_neq x).
     + ring.
     + lia.""", (1, None)),
    ("z_arith", "forgotten_case", _B, "forall x y : Z, Z.max x y = x \\/ Z.max x y = y",
     "Show that the maximum of integers x and y is x or y, depending on whether x <= y or y <= x.",
     """intros x y.
     destruct (Z.le_ge_cases x y) as [H|H].
     - right.
     apply Z.max_r.
     exact H.
     - left.
     apply Z.max_l.
     exact H.""", (1, None)),
    ("z_arith", "forgotten_case", _B, "forall x y : Z, Z.min x y <= x",
     "Show that the minimum of integers x and y is at most x, depending on whether x <= y or y <= x.",
     """intros x y.
     destruct (Z.le_ge_cases x y) as [H|H].
     - rewrite Z.min_l.
     + apply Z.le_refl.
     + exact H.
     - rewrite Z.min_r.
     + exact H.
     + exact H.""", (1, None)),
    ("z_arith", "forgotten_case", _L, "forall x : Z, Z.abs (- x) = Z.abs x",
     "Show that |-x| = |x| for every integer x, regardless of the sign of x.",
     """intros x.
     apply Z.abs_opp.""", (1, "destruct (Z.le_gt_cases 0 x) as [H|H].")),
    ("z_arith", "forgotten_case", _N, "forall x : Z, x <= Z.abs x",
     "Show that every integer x is at most |x|, treating negative and nonnegative x separately.",
     """intros x.
     destruct (Z.le_gt_cases 0 x) as [H|H].
     - rewrite (Z.abs_eq x H).
     apply Z.le_refl.
     - apply Z.le_trans with (m := 0).
     + lia.
     + apply Z.abs_nonneg.""", (1, None)),
    # ---- z_numtheory
    ("z_numtheory", "forgotten_case", _B, "forall b : bool, (2 | if b then 4 else 6)",
     "Show that 2 divides the integer that is 4 when b holds and 6 otherwise, depending on whether b is true "
     "or false.",
     """intros b.
     destruct b.
     - exists 2.
     reflexivity.
     - exists 3.
     reflexivity.""", (1, None)),
    ("z_numtheory", "forgotten_case", _B, "forall a b : Z, (a | b) -> (Z.abs a | b)",
     "Suppose that a divides b. Show that |a| divides b, depending on the sign of a.",
     """intros a b Hd.
     destruct (Z.le_gt_cases 0 a) as [H|H].
     - rewrite (Z.abs_eq a H).
     exact Hd.
     - rewrite (Z.abs_neq a).
     + apply Z.divide_opp_l.
     exact Hd.
     + lia.""", (1, None)),
]


def _build() -> tuple[Theorem, ...]:
    counter: dict[tuple[str, str, str], int] = {}
    out = []
    for env, family, variant, statement, question, gold, slip in _RAW:
        k = (env, family, variant)
        counter[k] = counter.get(k, 0) + 1
        i = counter[k]
        sentences = tuple(s.strip() for s in gold.strip().splitlines() if s.strip())
        out.append(Theorem(
            tid=f"{env}/{family}/{variant}/{i:02d}", env_id=env, family=family, variant=variant,
            name=f"t_{_ENV_ABBR[env]}_{_FAM_ABBR[family]}_{_VAR_ABBR[variant]}{i:02d}",
            statement=statement, question=question, gold=sentences, slip=(int(slip[0]), slip[1])))
    return tuple(out)


THEOREMS: tuple[Theorem, ...] = _build()


def slipped(th: Theorem) -> tuple[str, ...]:
    """The gold proof with the theorem's slip applied (the replaced sentence, or the sentence deleted)."""
    i, text = th.slip
    body = list(th.gold)
    if text is None:
        del body[i]
    else:
        body[i] = text
    return tuple(body)


def script(th: Theorem, proof: Sequence[str]) -> str:
    """The full ``.v`` text: the environment's preamble, ``Theorem name : statement.``, ``Proof.``, the
    sentences one per line, ``Qed.``."""
    lines = [ENVS[th.env_id].preamble.rstrip("\n"), f"Theorem {th.name} : {th.statement}.", "Proof."]
    lines += [s.strip() for s in proof if s.strip()]
    lines.append("Qed.")
    return "\n".join(lines) + "\n"

