"""Decision units and one-unit edits of Coq proof scripts (papers/countermem.md §3.2, App. D.1 / Table 4).

The CounterMem paper's Math column uses a tactic (a proof step) as the decision unit. Here a proof is
the body between ``Proof.`` and ``Qed.`` and its units are its **sentences** (Coq reference manual,
"Sentences": a command or tactic ended by a period followed by a blank), each with its bullet
(``- simpl.``): one tactic application per unit. A proof is printed one sentence per line.

One-unit edits (Table 4's "tactic or proof step"):

* replace a tactic — the closing decision procedures ``lia`` ↔ ``nia`` ↔ ``ring`` (and
  ``reflexivity``), ``auto`` ↔ ``eauto``;
* change a lemma name (a neighbour in the standard library's naming: ``add`` ↔ ``mul``, ``_l`` ↔
  ``_r``, ``comm`` ↔ ``assoc``; :data:`LEMMA_NEIGHBOURS`) or a rewrite direction (``rewrite L`` ↔
  ``rewrite <- L``);
* change the induction variable (another variable the proof introduces or names);
* insert a missing ``intros`` before the first sentence;
* add a case analysis (``destruct x.``) before a bullet whose goal split is missing.

An insertion is a one-unit edit too: the unit it lands before is replaced by two sentences, and
:meth:`CoqEdits.diff_units` reports it as ``unit → "inserted. unit"``; a deletion replaces a unit by
nothing and is reported as ``unit → ""``. Every other pair of proofs that differ in more than one
sentence is not one edit (``None``).

Signatures (Eq. 4's redundancy and conflict) mask identifiers that are not tactic keywords
(``rewrite <- Nat.add_comm.`` → ``rewrite <- <id>.``) and numerals (``<num>``); :meth:`CoqEdits.transfer`
carries a stored edit onto a new proof by binding the masked identifiers of the stored ``before``
to the matching sentence's tokens, as the SQL and Python edit models do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cfjax.types import EditError, EditModel, Unit

__all__ = ["CoqEdits", "sentences", "TACTIC_KEYWORDS", "CLOSERS", "LEMMA_NEIGHBOURS"]

_BULLET = re.compile(r"^([-+*]+|[{}])\s*")

#: words that are Coq tactic syntax, never masked by a signature
TACTIC_KEYWORDS = frozenset("""
intros intro induction destruct case elim rewrite apply eapply exact simpl cbn cbv compute unfold fold
reflexivity symmetry transitivity lia nia ring ring_simplify field auto eauto trivial tauto intuition
congruence discriminate injection inversion subst split left right exists assert pose set specialize
generalize revert clear rename replace omega f_equal contradiction exfalso constructor econstructor
try repeat do now as in at with using by eqn forall fun let match end idtac first solve progress
""".split())

#: closing decision procedures and their one-unit alternatives (lia ↔ nia ↔ ring, auto ↔ eauto)
CLOSERS = {
    "lia": ("nia", "ring", "auto"),
    "nia": ("lia", "ring"),
    "ring": ("lia", "nia", "reflexivity"),
    "reflexivity": ("ring", "lia", "auto"),
    "auto": ("eauto", "lia", "trivial"),
    "eauto": ("auto",),
    "trivial": ("auto", "reflexivity"),
    "congruence": ("auto", "lia"),
}

#: lemma-name neighbours a model confuses: a component of a qualified name → its look-alikes
LEMMA_NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "add": ("mul", "sub"), "mul": ("add",), "sub": ("add",), "comm": ("assoc",), "assoc": ("comm",),
    "l": ("r",), "r": ("l",), "le": ("lt",), "lt": ("le",), "succ": ("pred",), "andb": ("orb",),
    "orb": ("andb",), "abs": ("opp",), "opp": ("abs",),
}
#: whole lemma names a model confuses (the standard library's list lemmas)
LEMMA_SWAPS: dict[str, tuple[str, ...]] = {
    "rev_app_distr": ("rev_involutive", "app_assoc"), "rev_involutive": ("rev_app_distr",),
    "app_length": ("rev_length",), "rev_length": ("app_length",), "app_nil_r": ("app_nil_l",),
    "app_nil_l": ("app_nil_r",), "map_app": ("map_length",), "map_length": ("map_app",),
    "app_assoc": ("app_comm_cons",),
}

#: an identifier or a numeral, as a whole word (what a binding renames)
_NAME = re.compile(r"(?<![\w.'])(?:[A-Za-z_][A-Za-z0-9_'.]*[A-Za-z0-9_']|[A-Za-z_]|\d+)(?![\w'])")
_TOKEN = re.compile(r"<-|->|[A-Za-z_][A-Za-z0-9_'.]*[A-Za-z0-9_']|[A-Za-z_]|\d+|\S")


def sentences(proof: str) -> list[str]:
    """The sentences of a proof body, each with its bullet, whitespace-normalised.

    Cut by the checker's own lexer (:func:`cfjax.domains.math.coq.split_sentences`: a period followed
    by a blank ends a sentence, not the one in ``Nat.add_comm``, a comment or a string), so the edit
    model's units are exactly the sentences Coq runs. Comments are dropped; a bullet or ``{`` joins the
    sentence it introduces (``- simpl.``), a ``}`` is a unit of its own. Raises :class:`EditError` on
    an unterminated sentence, comment or string, or a bullet with nothing after it."""
    from cfjax.domains.math.coq import _LexError, _strip_comments, split_sentences

    out: list[str] = []
    prefix = ""
    for text, _ in split_sentences(proof):
        try:
            t = " ".join(_strip_comments(text).split())
        except _LexError as e:
            raise EditError(f"an unterminated {e.kind} in the proof") from None
        if not t:
            continue
        if _BULLET.fullmatch(t + " ") and t != "}":
            prefix += t + " "
            continue
        if t != "}" and not t.endswith("."):
            raise EditError(f"the proof's last sentence is unterminated (no final period, or an open comment "
                            f"or string): {t[:60]!r}")
        out.append(prefix + t)
        prefix = ""
    if prefix:
        raise EditError(f"a bullet with no sentence after it: {prefix.strip()!r}")
    return out


def _split_bullet(s: str) -> tuple[str, str]:
    m = _BULLET.match(s)
    return (m.group(1) + " ", s[m.end():]) if m else ("", s)


def _tokens(s: str) -> list[str]:
    return _TOKEN.findall(s)


def _is_ident(tok: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_'.]*", tok)) and tok not in TACTIC_KEYWORDS


class CoqEdits(EditModel):
    """One-sentence edits of Coq proof bodies (module docstring)."""

    name = "math"

    # ------------------------------------------------------------------ units and printing
    def units(self, action: str) -> list[Unit]:
        ss = sentences(action)
        if not ss:
            raise EditError("an empty proof")
        return [Unit("tactic", s) for s in ss]

    def normalize(self, action: str) -> str:
        try:
            return "\n".join(u.text for u in self.units(action))
        except EditError:
            return " ".join(action.split())

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        us = [u.text for u in self.units(action)]
        if not 0 <= index < len(us):
            raise EditError(f"no sentence {index} in a proof of {len(us)}")
        new = sentences(new_text) if new_text.strip() else []
        if len(new) > 2:
            raise EditError("a one-unit edit inserts at most one sentence")
        out = us[:index] + new + us[index + 1:]
        if not out:
            raise EditError("the edit deletes the whole proof")
        return "\n".join(out)

    def diff_units(self, before: str, after: str) -> tuple[int, Unit, Unit] | None:
        """The one sentence that changed: replaced (same length), an insertion next to sentence ``i``
        (reported as ``i → "inserted. sentence_i"`` or ``"sentence_i inserted."``) or a deletion
        (``i → ""``); ``None`` otherwise."""
        try:
            a, b = [u.text for u in self.units(before)], [u.text for u in self.units(after)]
        except EditError:
            return None
        if len(a) == len(b):
            d = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
            return (d[0], Unit("tactic", a[d[0]]), Unit("tactic", b[d[0]])) if len(d) == 1 else None
        if len(b) == len(a) + 1:  # insertion of b[j]
            for j in range(len(b)):
                if b[:j] + b[j + 1:] == a:
                    i = min(j, len(a) - 1)
                    return i, Unit("tactic", a[i]), Unit("tactic", " ".join(b[i:i + 2]))
            return None
        if len(a) == len(b) + 1:  # deletion of a[j]
            for j in range(len(a)):
                if a[:j] + a[j + 1:] == b:
                    return j, Unit("tactic", a[j]), Unit("tactic", "")
        return None

    # ------------------------------------------------------------------ signatures and transfer
    def signature(self, unit_text: str) -> str:
        out = []
        for tok in _tokens(" ".join(unit_text.split())):
            if tok.isdigit():
                out.append("<num>")
            elif _is_ident(tok):
                out.append("<id>")
            else:
                out.append(tok)
        return " ".join(out)

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        """``target`` with the stored edit carried onto its first sentence of ``before``'s masked shape:
        identifiers of ``before`` bind to that sentence's tokens, and ``after``'s identifiers that
        ``before`` bound are renamed (the rest, e.g. a new lemma name, are kept literally)."""
        try:
            ts = [u.text for u in self.units(target)]
        except EditError:
            return None
        sig = self.signature(before)
        bt = _tokens(" ".join(before.split()))
        for i, s in enumerate(ts):
            if self.signature(s) != sig:
                continue
            st = _tokens(s)
            binding = {x: y for x, y in zip(bt, st) if _is_ident(x) or x.isdigit()}
            new = _NAME.sub(lambda m: binding.get(m.group(0), m.group(0)), " ".join(after.split()))
            try:
                out = self.replace_unit(target, i, new)
            except EditError:
                return None
            return out if out != self.normalize(target) else None
        return None

    # ------------------------------------------------------------------ rule operators
    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        """Every rule operator's one-sentence alternative ``(index, new text)`` (module docstring):
        closers, rewrite direction, lemma neighbours, induction variables, a missing ``intros`` and a
        missing case analysis before a bullet."""
        try:
            us = [u.text for u in self.units(action)]
        except EditError:
            return []
        names = _proof_variables(us)
        out: list[tuple[int, str]] = []
        for i, s in enumerate(us):
            bullet, body = _split_bullet(s)
            head = body.rstrip(".").strip()
            if head in CLOSERS:
                out += [(i, f"{bullet}{alt}.") for alt in CLOSERS[head]]
            m = re.match(r"(rewrite|erewrite)\s+(<-\s*|->\s*)?(.*)$", head)
            if m:
                arrow, rest = m.group(2), m.group(3)
                out.append((i, f"{bullet}{m.group(1)} {'' if arrow and arrow.startswith('<') else '<- '}{rest}."))
            for lemma in sorted({t for t in _tokens(head) if _is_ident(t) and "_" in t and t not in names}):
                for alt in _neighbours(lemma):
                    out.append((i, bullet + re.sub(rf"(?<![\w.']){re.escape(lemma)}(?![\w'])", alt, body)))
            m = re.match(r"(induction|destruct)\s+([A-Za-z_][A-Za-z0-9_']*)(.*)$", head)
            if m:
                old, rest = m.group(2), m.group(3)
                for v in names:
                    if v != old:  # the pattern's reuse of the old name follows the new variable
                        pat = re.sub(rf"(?<![\w']){re.escape(old)}(?![\w'])", v, rest)
                        out.append((i, f"{bullet}{m.group(1)} {v}{pat}."))
        if not re.match(r"intros?\b", _split_bullet(us[0])[1]):
            out.append((0, f"intros. {us[0]}"))
        first = next((i for i, s in enumerate(us) if _split_bullet(s)[0]), None)  # the first case bullet
        if first is not None and not (first and re.match(r"(induction|destruct|case|elim|split)\b",
                                                         _split_bullet(us[first - 1])[1])):
            for v in names:
                out += [(first, f"destruct {v}. {us[first]}"), (first, f"destruct {v} as [|{v}']. {us[first]}")]
        seen, uniq = set(), []
        for i, t in out:
            if (i, t) not in seen and t != us[i]:
                seen.add((i, t))
                uniq.append((i, t))
        return uniq


def _neighbours(lemma: str) -> list[str]:
    """Plausible wrong neighbours of a lemma name (``Nat.add_comm`` → ``Nat.mul_comm``, ``Nat.sub_comm``;
    ``rev_length`` → ``app_length``), and the name without a last ``_l``/``_r`` (a nonexistent
    ``Nat.add_comm_r`` → ``Nat.add_comm``)."""
    prefix, _, last = lemma.rpartition(".")
    pre = prefix + "." if prefix else ""
    parts = last.split("_")
    out = [pre + alt for alt in LEMMA_SWAPS.get(last, ())]
    for k, p in enumerate(parts):
        for alt in LEMMA_NEIGHBOURS.get(p, ()):
            out.append(pre + "_".join(parts[:k] + [alt] + parts[k + 1:]))
    if len(parts) > 2 and parts[-1] in ("l", "r"):
        out.append(pre + "_".join(parts[:-1]))
    return [o for o in dict.fromkeys(out) if o != lemma][:4]


def _proof_variables(us: Sequence[str]) -> list[str]:
    """Variables the proof introduces or names (``intros n m``, ``induction n as [|n' IH]``, ``destruct b``)."""
    names: list[str] = []
    for s in us:
        body = _split_bullet(s)[1].rstrip(".")
        m = re.match(r"intros?\s+(.*)$", body)
        if m:
            names += [t for t in re.findall(r"[A-Za-z_][A-Za-z0-9_']*", m.group(1).split(" as ")[0])
                      if t not in TACTIC_KEYWORDS]
        m = re.match(r"(?:induction|destruct)\s+([A-Za-z_][A-Za-z0-9_']*)", body)
        if m:
            names.append(m.group(1))
    for s in us:  # short lowercase names the proof uses (``with (m := m)``, ``rewrite (Z.abs_eq x H)``)
        names += [t for t in re.findall(r"(?<![\w.'])([a-z][0-9']*)(?![\w.'])", _split_bullet(s)[1].rstrip("."))]
    return [n for n in dict.fromkeys(names) if not n[:1].isupper() and not n.startswith("IH") and not n.startswith("H")]
