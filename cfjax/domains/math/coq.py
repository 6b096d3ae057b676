"""Checking untrusted Coq proof scripts with Coq's kernel, under the sandbox's OS layers.

A candidate is the *body* of a proof: tactic sentences only. :class:`CoqChecker` states the
theorem itself (``Theorem <name> : <statement>.`` after the task's ``preamble``), feeds the
candidate's sentences, ends the proof with ``Qed.`` itself and accepts it only when the kernel
takes the ``Qed`` **and** ``Print Assumptions <name>.`` answers ``Closed under the global context``
(Coq reference manual, "Proof mode" → *Entering and exiting proof mode*: ``Qed`` re-checks the whole
proof term in the kernel; "Vernacular commands" → *Print Assumptions*: the axioms, parameters and
admitted lemmas a constant depends on). ``admit``/``give_up`` are tactics and so allowed, but they
can never pass: ``Qed`` refuses a proof with given-up goals, and an admitted dependency would be an
axiom.

Length: one module on purpose — the lexer, the refusal rules, the two checking paths (persistent REPL,
fresh ``coqc``) and the sandbox launch share one notion of a sentence and one verdict format.

What a candidate may write
--------------------------
:func:`split_sentences` cuts the body the way Coq's lexer does (reference manual, "Lexical
conventions"; checked against ``coqc``'s own sentence boundaries in the tests): comments
``(* … *)`` nest and contain strings (Coq 8.16 lexes ``"…"`` inside a comment, so ``*)`` in such a
string does not close it); strings ``"…"`` escape a quote as ``""``; a sentence ends at a run of dots
followed by a blank or the end (``Nat.add_comm`` and ``..`` inside a term do not end it; ``...``
does); bullets (``-``, ``+``, ``*`` and their repeats ``--``, ``**``…), ``{`` and ``}`` and ``2: {``
are sentences of their own (reference manual, "Proof mode" → *Bullets*, *Curly braces*). What ends
a sentence here is a superset of what ends one for Coq (any Unicode blank or control character
after the dots), so a command can never hide inside what this module takes for one tactic.

Every sentence must *look like a tactic* (the allow-list): a bullet or brace, or an optional goal
selector (``2:``, ``all:``, ``[x]:``, ``!:``, ``par:``) then a lowercase tactic word, ``(`` or
``[``. A deny-list of vernacular commands (``Qed``, ``Admitted``, ``Axiom``, ``Require``,
``Declare ML Module``, ``Load``, ``Redirect``, ``Extraction``, ``Drop``, ``Set``, ``Print``,
``Time``/``Fail``/``Timeout``, attributes ``#[…]``, ``Ltac``, ``Hint``, ``Notation``, ``Reset``,
``BackTo``… :data:`FORBIDDEN`) is a second check that also names the command in the message.
Either refusal is ``status="refused"`` before Coq runs at all.

The ``preamble`` is the suite's (trusted but validated; a bad one is a ``ValueError`` naming the
line): only ``Require [Import|Export] <module of Coq's standard library>.`` (``From Coq``/``From
Ltac2`` too), ``Import``/``Export <module>.``, ``[Local] Open Scope <scope>.`` and ``[Local]
Set``/``Unset`` of the flags in :data:`PREAMBLE_FLAGS` (never ``Guard Checking``, ``Universe
Checking``, ``Positivity Checking``: they would make the kernel unsound). The ``statement`` may not
contain a sentence end (nor an unterminated comment or string); its own failure in Coq (a type
error) is a ``ValueError`` too: the suite's error, not the candidate's.

Two ways to run Coq
-------------------
* **persistent** (default): one long-lived ``coqtop -emacs`` per preamble (at most
  ``max_processes``, least recently used first out), its preamble loaded once. Each sentence is
  sent with a synchronisation command behind it, ``Check cfjax_sync_<random>.``, whose error echo
  (with a fresh random name per sentence) marks the end of the sentence's answer: the *genuine*
  prompt is the last ``<prompt>…</prompt>`` before that echo, so a tactic that prints a fake prompt
  or a fake ``Closed under the global context`` (``idtac "…"``) cannot forge a verdict — it would have
  to print a name it cannot know. A sentence failed iff the prompt's state number did not advance
  (the REPL undoes a failed command). After every check, ``BackTo <state after the preamble>.``
  returns to the clean state (a check cannot leave a lemma, an auxiliary ``_subproof`` constant or
  an open proof behind; the tests check it); the prompt must then show exactly that state and no
  open proof, or the process is replaced. A timeout, a crash, an out-of-memory error, an output
  flood or any disagreement with the protocol also replaces the process (and a disagreement is
  re-checked by a fresh ``coqc``). A process is recycled after ``max_checks`` checks.
* **fresh** (``persistent=False``): one ``coqc -time`` per check on a file in a fresh scratch
  directory. ``-time`` prints ``Chars <start> - <end>`` for every command Coq executed; a proof is
  accepted only if those ranges are *exactly* the ones this module wrote (so Coq read the same
  sentences), and the ``Print Assumptions`` answer is the text between the last two ranges. The
  candidate's time budget starts when Coq has loaded the preamble (so both ways bound the same
  work).

Both ways give the same verdict on the same inputs (the tests compare them), report the first
failing sentence (0-based index, its 1-based line in the candidate's text, its text), Coq's message
as a user sees it (from ``Error:`` on, without the ``File "…", line …, characters …`` or
``Toplevel input`` header) and, with ``goals=True``, the goal state before that sentence
(``Show.``; evar numbers ``(ID n)`` removed, since they differ between processes).

Sandbox (what is and is not defended)
-------------------------------------
Coq runs through :func:`cfjax.sandbox.launch_argv`: a Python child enters every OS layer of
:mod:`cfjax.sandbox._layers` that the machine offers — new mount, network, PID, IPC, UTS and user
namespaces; a private read-only root; uid 65534 when cfjax is root; ``no_new_privs``; a Landlock
domain that may read only Coq's and OCaml's directories (``coqc -where``, ``coq-core``), the
libraries ``coqtop`` links (``ldd``) and the loader cache, list ``/usr/lib/ocaml``, execute only
``coqtop``/``coqc`` and their ELF interpreter, write only the work directory, with no TCP and no
signals or abstract sockets leaving it (``landlock(7)``); the launcher's seccomp filter
(``seccomp(2)``; ``execve`` allowed, ``fork``/``vfork``/non-thread ``clone``/``clone3``,
``execveat``, ``ptrace``, sockets, mounts, namespaces, ``bpf``, ``io_uring``, keyrings refused) —
then sets ``RLIMIT_AS`` (``memory_mb``), ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``,
``RLIMIT_NPROC`` 0 and ``RLIMIT_CORE`` 0 and ``execve``-s Coq, which keeps every layer. The work
directory is a private tmpfs of ``scratch_mb`` MB and ``scratch_files`` inodes. The wall clock is
enforced from outside: the whole process group is killed. Coq starts no process (``strace``: none;
``native_compute`` is off with ``-native-compiler no``, and ``psatz``'s external prover cannot be
started: ``fork`` is refused). Without a layer the checker still runs and names it in
``CoqVerdict.sandbox_missing`` (the Python world's policy: the CLI decides whether to refuse).

Not defended: a bug of the Linux kernel reachable through the allowed system calls; a bug of Coq's
kernel (a proof of ``False`` that ``Qed`` accepts is accepted here too); side channels; what a
tactic computes within its time, memory and output bounds. The stdlib axioms a preamble imports
(``Classical``…) are visible to ``Print Assumptions``, so a proof using them is ``"axiom"``.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

from cfjax.sandbox import (LAYERS, SANDBOX_UID, SCRATCH_FILES, SCRATCH_MB, launch_argv, missing as layers_missing,
                           parse_launch_report)

__all__ = ["CoqVerdict", "CoqChecker", "split_sentences", "coq_info", "INSTALL_HINT", "STATUSES", "FORBIDDEN",
           "PREAMBLE_FLAGS"]

INSTALL_HINT = "Coq is not installed: apt-get install coq (Debian/Ubuntu) — the math suite needs its kernel"

#: every ``CoqVerdict.status``
STATUSES = ("proved", "error", "incomplete", "axiom", "refused", "timeout", "memory", "crash")

#: vernacular commands (and command prefixes) a candidate may never write (the second check)
FORBIDDEN = frozenset("""
Qed Defined Admitted Abort Save Proof Theorem Lemma Remark Fact Corollary Proposition Property Example
Definition Fixpoint CoFixpoint Inductive CoInductive Variant Record Structure Class Instance Existing
Program Let Axiom Axioms Parameter Parameters Hypothesis Hypotheses Variable Variables Conjecture Context
Require Import Export From Load Declare Redirect Extraction Recursive Separate Extract Drop Add Remove Cd Pwd
Print Check Eval Compute About Locate Search SearchPattern SearchRewrite Test Set Unset Local Global Export
Polymorphic Monomorphic Cumulative NonCumulative Private Time Timeout Fail Succeed Instructions Profile
Module Section End Chapter Reset Back BackTo Restart Ltac Ltac2 Hint Hints Create Remove Notation Infix
Reserved Tactic Opaque Transparent Strategy Arguments Implicit Goal Show Undo Focus Unfocus Unfocused Guarded
Optimize Info Coercion Canonical Typeclasses Scheme Combined Functional Derive Generalizable Universe
Universes Constraint Primitive Register Open Close Delimit Bind Include Collection Obligation Obligations Next
Solve Final Numeral Number String Enable Disable Attributes Unshelve Quit Debug Inspect Abstract Comments
""".split())

#: flags a preamble may ``Set``/``Unset`` (display, implicit arguments, unification and tactic
#: behaviour; none of them changes what the kernel accepts)
PREAMBLE_FLAGS = frozenset({
    "Implicit Arguments", "Strict Implicit", "Strongly Strict Implicit", "Contextual Implicit",
    "Reversible Pattern Implicit", "Maximal Implicit Insertion", "Asymmetric Patterns", "Bullet Behavior",
    "Default Goal Selector", "Keyed Unification", "Universe Polymorphism", "Primitive Projections",
    "Regular Subst Tactic", "Structural Injection", "Keep Proof Equalities", "Intuition Negation Unfolding",
    "Hyps Limit", "Firstorder Depth", "Warnings", "Printing Width", "Printing Depth", "Printing All",
    "Printing Implicit", "Printing Coercions", "Printing Notations", "Printing Universes",
    "Printing Existential Instances", "Printing Parentheses", "Printing Records", "Printing Projections",
    "Printing Unfocused", "Printing Goal Names", "Printing Matching", "Printing Synth", "Printing Wildcard",
    "Printing If", "Printing Let", "Printing Compact Contexts", "Printing Factorizable Match Patterns",
})

_MAX_MESSAGE = 600
_MAX_GOALS = 4000
_MAX_PROOF_CHARS = 100_000
_FILE = "cfjax_check"

# ---------------------------------------------------------------------------------------------- lexer


def _blank(c: str) -> bool:
    """A character after which a dot ends a sentence (a superset of Coq's blanks)."""
    return c.isspace() or c < " " or c == "\x7f"


class _LexError(Exception):
    def __init__(self, kind: str, pos: int) -> None:
        super().__init__(kind, pos)
        self.kind, self.pos = kind, pos


def _string_end(text: str, i: int) -> int:
    """End (exclusive) of the string starting at ``text[i] == '"'`` (``""`` is an escaped quote)."""
    n, j = len(text), i + 1
    while j < n:
        if text[j] == '"':
            if j + 1 < n and text[j + 1] == '"':
                j += 2
                continue
            return j + 1
        j += 1
    raise _LexError("string", i)


def _comment_end(text: str, i: int) -> int:
    """End (exclusive) of the comment starting at ``text[i:i+2] == '(*'``: nested comments, and
    strings inside (whose ``*)`` does not close the comment), as Coq 8.16 lexes them."""
    n, j, depth = len(text), i + 2, 1
    while j < n:
        if text.startswith("(*", j):
            depth += 1
            j += 2
        elif text.startswith("*)", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        elif text[j] == '"':
            try:
                j = _string_end(text, j)
            except _LexError:
                raise _LexError("comment", i) from None
        else:
            j += 1
    raise _LexError("comment", i)


_SELECTOR = r"(?:\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|all|par|!|\[\s*[A-Za-z_][\w']*\s*\])"
_SEL_BRACE = re.compile(_SELECTOR + r"\s*:\s*\{")
_SEL_PREFIX = re.compile(r"\s*" + _SELECTOR + r"\s*:(?![:=>])")


class _Piece(NamedTuple):
    text: str
    start: int  # character offset in the text it was cut from
    line: int  # 1-based line of its first character


def _scan(text: str) -> tuple[list[_Piece], tuple[str, int, int] | None]:
    """Cut ``text`` into sentences; the second value is ``(kind, offset, line)`` of a lexical problem
    (``"comment"``/``"string"`` unterminated, ``"sentence"`` without its final dot) — everything
    before it was cut normally."""
    pieces: list[_Piece] = []
    n, i = len(text), 0
    line, counted = 1, 0

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    while True:
        try:
            while i < n:
                c = text[i]
                if _blank(c):
                    i += 1
                elif text.startswith("(*", i):
                    i = _comment_end(text, i)
                else:
                    break
        except _LexError as e:
            return pieces, (e.kind, e.pos, line_at(e.pos))
        if i >= n:
            return pieces, None
        start, c = i, text[i]
        if c in "{}":
            end = i + 1
        elif c in "-+*":
            end = i
            while end < n and text[end] == c:
                end += 1
        else:
            m = _SEL_BRACE.match(text, i)
            if m:
                end = m.end()
            else:
                end, j = -1, i
                try:
                    while j < n:
                        ch = text[j]
                        if ch == '"':
                            j = _string_end(text, j)
                        elif ch == "(" and text.startswith("(*", j):
                            j = _comment_end(text, j)
                        elif ch == ".":
                            k = j
                            while k < n and text[k] == ".":
                                k += 1
                            if k == n or _blank(text[k]):
                                end = k
                                break
                            j = k
                        else:
                            j += 1
                except _LexError as e:
                    return pieces, (e.kind, start, line_at(start))
                if end < 0:
                    return pieces, ("sentence", start, line_at(start))
        pieces.append(_Piece(text[start:end], start, line_at(start)))
        i = end


def split_sentences(proof: str) -> list[tuple[str, int]]:
    """The Coq sentences of a proof body as ``(text, 1-based line)``, cut as Coq's lexer does (module
    docstring). Leading comments and blanks are not part of a sentence; comments inside one are. An
    unterminated last sentence (or comment, or string) comes last, as it is, with its line."""
    pieces, problem = _scan(proof)
    out = [(p.text, p.line) for p in pieces]
    if problem is not None:
        kind, pos, line = problem
        rest = proof[pos:].strip()
        if rest:
            out.append((rest, line))
    return out


def _blank_out(text: str) -> str:
    """``text`` with comments and strings replaced by spaces (same length; for shape tests)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("(*", i):
            j = _comment_end(text, i)
            out.append(" " * (j - i))
            i = j
        elif text[i] == '"':
            j = _string_end(text, i)
            out.append('"' + " " * (j - i - 2) + '"')
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_WORD = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")


def _refusal(piece: str) -> str | None:
    """Why a candidate sentence is not a tactic sentence (None when it is one)."""
    if piece in ("{", "}") or re.fullmatch(r"-+|\++|\*+", piece) or _SEL_BRACE.fullmatch(piece):
        return None
    body = _blank_out(piece).strip()
    if "#[" in body or body.startswith("#"):
        return "attributes (`#[...]`) are commands, not tactics"
    m = _SEL_PREFIX.match(body)
    rest = body[m.end():].lstrip() if m else body
    w = _WORD.match(rest)
    if w:
        word = w.group(0)
        first = word.split(".", 1)[0]
        if first in FORBIDDEN or word in FORBIDDEN:
            return f"`{first}` is a command, not a tactic (the checker states the theorem and ends the proof itself)"
        last = word.rsplit(".", 1)[-1]
        if word[0].islower() or word[0] == "_" or ("." in word and (last[0].islower() or last[0] == "_")):
            return None
        return f"`{word}` does not start a tactic (a tactic starts with a lowercase name)"
    if rest[:1] in ("(", "["):
        return None
    return f"`{rest[:20]}` does not start a tactic"


# ------------------------------------------------------------------------------------- validation


_MOD = r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*"
_REQUIRE = re.compile(rf"(?:From\s+(?P<root>[A-Za-z_][\w']*)\s+)?Require(?:\s+(?:Import|Export))?"
                      rf"(?P<mods>(?:\s+{_MOD})+)\s*\.")
_IMPORT = re.compile(rf"(?:Import|Export)(?:\s+{_MOD})+\s*\.")
_SCOPE = re.compile(r"(?:(?:Local|Global)\s+)?(?:Open|Close)\s+Scope\s+[A-Za-z_][\w']*\s*\.")
_FLAG = re.compile(r"(?:Local\s+|Global\s+)?(?P<verb>Set|Unset)\s+(?P<flag>[A-Z][\w]*(?:\s+[A-Z][\w]*)*)"
                   r"(?:\s+(?:\"[^\"]*\"|\d+))?\s*\.")
_NAME = re.compile(r"[A-Za-z_][\w']*")
_KEYWORDS = frozenset("as at cofix else end exists exists2 fix for forall fun if in let match mod return then "
                      "using where with Prop Set SProp Type".split())


@functools.lru_cache(maxsize=4)
def _stdlib_modules(coqlib: str) -> frozenset[str]:
    """Logical names of every compiled library under ``coqlib`` (``Coq.Arith.PeanoNat``, ``Ltac2.Init``)."""
    out = set()
    for sub, root in (("theories", "Coq"), ("user-contrib", "")):
        base = os.path.join(coqlib, sub)
        for d, _dirs, files in os.walk(base):
            rel = os.path.relpath(d, base)
            parts = [] if rel == "." else rel.split(os.sep)
            for f in files:
                if f.endswith(".vo"):
                    out.add(".".join(([root] if root else []) + parts + [f[:-3]]))
    return frozenset(out)


def _known_module(name: str, root: str | None, modules: frozenset[str]) -> bool:
    for full in modules:
        if root and not full.startswith(root + "."):
            continue
        if full == name or full.endswith("." + name):
            return True
    return False


@functools.lru_cache(maxsize=64)
def _validate_preamble(preamble: str, coqlib: str | None) -> tuple[str, ...]:
    """The preamble's sentences, each on its own (comments dropped), or ``ValueError`` naming the line."""
    pieces, problem = _scan(preamble)
    if problem is not None:
        kind, _pos, line = problem
        what = {"comment": "an unterminated comment", "string": "an unterminated string",
                "sentence": "a sentence without its final '.'"}[kind]
        raise ValueError(f"preamble line {line}: {what}")
    modules = _stdlib_modules(coqlib) if coqlib else frozenset()
    out = []
    for p in pieces:
        text = " ".join(_strip_comments(p.text).split())
        line = f"preamble line {p.line}: `{text[:120]}`"
        m = _REQUIRE.fullmatch(text)
        if m:
            root = m.group("root")
            if root is not None and root not in ("Coq", "Ltac2"):
                raise ValueError(f"{line} is not allowed: only `From Coq` / `From Ltac2` libraries")
            for mod in m.group("mods").split():
                if modules and not _known_module(mod, root, modules):
                    raise ValueError(f"{line} is not allowed: `{mod}` is not a library of Coq's standard library")
            out.append(text)
            continue
        if _IMPORT.fullmatch(text) or _SCOPE.fullmatch(text):
            out.append(text)
            continue
        m = _FLAG.fullmatch(text)
        if m:
            if m.group("flag") not in PREAMBLE_FLAGS:
                raise ValueError(f"{line} is not allowed: `{m.group('flag')}` is not one of the flags a preamble "
                                 "may set")
            out.append(text)
            continue
        raise ValueError(f"{line} is not allowed: a preamble holds only `Require Import <standard library>.`, "
                         "`Import <module>.`, `Open Scope <scope>.` and `Set <flag>.` lines")
    return tuple(out)


def _strip_comments(text: str) -> str:
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("(*", i):
            i = _comment_end(text, i)
            out.append(" ")
        elif text[i] == '"':
            j = _string_end(text, i)
            out.append(text[i:j])
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _validate_statement(statement: str) -> str:
    """The statement without a trailing ``.``; ``ValueError`` if it holds a sentence end."""
    text = statement.strip()
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1].rstrip()
    if not text:
        raise ValueError("the statement is empty")
    try:
        body = _blank_out(text)
    except _LexError as e:
        raise ValueError(f"the statement has an unterminated {e.kind}") from None
    n = len(body)
    for i, c in enumerate(body):
        if c == "." and (i + 1 == n or _blank(body[i + 1])):
            raise ValueError("the statement may not contain a sentence end ('.' followed by a blank)")
    return text


def _validate_name(name: str) -> str:
    if not _NAME.fullmatch(name or "") or name in _KEYWORDS or name in FORBIDDEN or name.startswith("cfjax_sync"):
        raise ValueError(f"the theorem name {name!r} is not a plain Coq identifier")
    return name


# ----------------------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class CoqVerdict:
    """The outcome of one check (module docstring).

    ``ok``: the kernel accepted the proof (``Qed``) and it depends on no axiom. ``status``: one of
    :data:`STATUSES`. ``sentence``/``line``/``failing``: the first failing sentence of the candidate
    (0-based index, 1-based line in the candidate's text, its text), None/""  when not applicable.
    ``message``: Coq's message as a user sees it, or the checker's one-line reason. ``goals``: the
    goal state before the failing sentence (only when asked). ``sandbox_missing``: the OS layers the
    Coq process did not get (empty when every layer was on or when Coq never ran)."""

    ok: bool
    status: str
    sentence: int | None
    line: int | None
    failing: str
    message: str
    goals: str
    seconds: float
    sandbox_missing: tuple[str, ...] = ()


class _Result(NamedTuple):
    """What one run of Coq found (before the seconds and the sandbox are filled in)."""

    status: str
    index: int | None  # candidate sentence index
    message: str
    goals: str = ""


# --------------------------------------------------------------------------------------- output text

_TAG = re.compile(r"</?(?:infomsg|warning|prompt|goals|message|feedback)>")
_HEADER = re.compile(r'^(?:Toplevel input|File "[^"\n]*", line \d+), characters -?\d+--?\d+:$')
_ID = re.compile(r" \(ID \d+\)")
_FETCH = re.compile(r"^Fetching opaque proofs from disk for .*$", re.M)


def _clean(text: str) -> str:
    text = _TAG.sub("", text.replace("\r\n", "\n"))
    return text


def _error_message(text: str) -> str:
    """Coq's error as a user sees it: from the first ``Error:`` line on, without location headers
    and the REPL's ``> …`` echo; trimmed."""
    lines = _clean(text).split("\n")
    start = next((k for k, ln in enumerate(lines) if ln.startswith("Error:")), None)
    if start is None:
        keep = [ln for ln in lines if ln.strip() and not _HEADER.match(ln) and not ln.startswith("> ")]
        msg = "\n".join(keep[-6:]).strip()
    else:
        keep = []
        for ln in lines[start:]:
            if _HEADER.match(ln):
                break
            keep.append(ln)
        msg = "\n".join(keep).strip()
    return _trim(msg, _MAX_MESSAGE)


def _goals_text(text: str) -> str:
    t = _ID.sub("", _clean(text))
    lines = [ln for ln in t.split("\n") if not _HEADER.match(ln) and not ln.startswith("While loading initial")]
    return _trim("\n".join(lines).strip("\n").rstrip(), _MAX_GOALS)


def _trim(s: str, n: int) -> str:
    s = s.strip()
    return s if len(s) <= n else s[: n - 1] + "…"


def _qed_status(message: str) -> str:
    m = message.lower()
    if ("incomplete proof" in m or "given up goals" in m or "shelved goals" in m
            or "unresolved existential" in m or "remaining open goals" in m):
        return "incomplete"
    return "error"


def _resource_status(message: str) -> str | None:
    m = message.lower()
    if "out of memory" in m or "not enough memory" in m or "stack overflow" in m:
        return "memory"
    return None


def _assumptions(text: str) -> tuple[bool, str]:
    """``(closed, message)`` from ``Print Assumptions``'s answer."""
    t = _FETCH.sub("", _clean(text)).strip()
    if t == "Closed under the global context":
        return True, ""
    return False, _trim("the proof depends on assumptions: " + " ".join(t.split()), _MAX_MESSAGE)


# -------------------------------------------------------------------------------------------- Coq


@functools.lru_cache(maxsize=4)
def _coq_paths(coqtop: str) -> dict | None:
    """``coqtop``, ``coqc``, ``version``, ``stdlib`` (``coqc -where``), ``corelib`` and the libraries
    the binaries link (``ldd``), or None when Coq is not here."""
    top = shutil.which(coqtop) if os.sep not in coqtop else (coqtop if os.access(coqtop, os.X_OK) else None)
    if top is None:
        return None
    top = os.path.realpath(top)
    coqc = os.path.join(os.path.dirname(top), "coqc")
    if not os.access(coqc, os.X_OK):
        found = shutil.which("coqc")
        if found is None:
            return None
        coqc = os.path.realpath(found)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": tempfile.gettempdir()}
    try:
        ver = subprocess.run([coqc, "--version"], capture_output=True, text=True, timeout=30, env=env).stdout
        where = subprocess.run([coqc, "-where"], capture_output=True, text=True, timeout=30, env=env).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version (\S+)", ver)
    if not m or not where or not os.path.isdir(where):
        return None
    stdlib = os.path.realpath(where)
    corelib = os.path.realpath(os.path.join(stdlib, "..", "coq-core"))
    libs: set[str] = set()
    for binary in (top, coqc):
        try:
            out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30, env=env).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for mm in re.finditer(r"=>\s*(/\S+)", out):
            libs.add(os.path.realpath(mm.group(1)))
    if not libs:  # no ldd: the directories of the usual multiarch libraries
        libs = {d for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64")
                if os.path.isdir(d)}
    return {"coqtop": top, "coqc": coqc, "version": m.group(1), "stdlib": stdlib,
            "corelib": corelib if os.path.isdir(corelib) else None, "libs": tuple(sorted(libs))}


def coq_info() -> dict | None:
    """``{"coqc", "coqtop", "version", "stdlib"}`` of the Coq on ``PATH`` (``cfjax doctor``), or None."""
    p = _coq_paths("coqtop")
    if p is None:
        return None
    return {"coqc": p["coqc"], "coqtop": p["coqtop"], "version": p["version"], "stdlib": p["stdlib"]}


class _Run(NamedTuple):
    """One ``coqc`` run: its output, the ``Chars`` ranges it printed, its exit status (None when
    stopped), why it was stopped (``"timeout"``, ``"startup"``, ``"flood"``, ``"died"`` or None) and
    the layers the launcher entered."""

    out: str
    ranges: list
    rc: int | None
    stop: str | None
    layers: dict | None


class _Died(Exception):
    """The Coq process ended (or its output could not be read)."""


class _Desync(Exception):
    """The REPL's answer did not have the expected shape."""


class _Flood(Exception):
    """Coq printed more than the output bound."""


_PROMPT = re.compile(r"<prompt>(?P<name>[^<]*?) < (?P<state>\d+) \|(?P<proofs>[^<]*?)\| (?P<depth>\d+) < </prompt>")


class _Process:
    """One sandboxed Coq process with its own scratch directory; output read from one pipe."""

    def __init__(self, checker: "CoqChecker", program: list[str], *, files: dict[str, str] | None = None,
                 stdin: bool) -> None:
        self.checker = checker
        self.scratch = tempfile.mkdtemp(prefix="cfjax-coq-", dir=checker.scratch_root)
        self.proc: subprocess.Popen | None = None
        self.buf = ""
        self.layers: dict[str, str] | None = None
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        self._total = 0
        self.started = time.monotonic()
        try:
            work = os.path.join(self.scratch, "work")
            os.mkdir(work, 0o700)
            os.mkdir(os.path.join(self.scratch, "root"), 0o700)
            for name, text in (files or {}).items():
                with open(os.path.join(work, name), "w", encoding="utf-8") as f:
                    f.write(text)
            if os.geteuid() == 0 and checker.isolation == "os":
                for name in os.listdir(work):
                    os.chown(os.path.join(work, name), SANDBOX_UID, SANDBOX_UID)
                os.chown(work, SANDBOX_UID, SANDBOX_UID)
            self.nonce = secrets.token_hex(12)
            argv = checker._argv(program, work, self.scratch, self.nonce)
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=work,
                                         start_new_session=True, close_fds=True)
            self.fd = self.proc.stdout.fileno()
            os.set_blocking(self.fd, False)
            if stdin:
                os.set_blocking(self.proc.stdin.fileno(), False)
            self._finalizer = weakref.finalize(self, _kill_group, self.proc, self.scratch)
        except BaseException:
            if self.proc is not None:
                _kill_group(self.proc, self.scratch)
            else:
                shutil.rmtree(self.scratch, ignore_errors=True)
            raise

    # ----------------------------------------------------------- reading
    def _read_some(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False at the deadline. Raises _Died at EOF."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([self.fd], [], [], left)
        if not r:
            return False
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError as e:
            raise _Died(str(e)) from None
        if not data:
            raise _Died("end of output")
        self._total += len(data)
        if self._total > self.checker.max_output_bytes:
            raise _Flood()
        self.buf += self._dec.decode(data)
        return True

    def read_launch(self, deadline: float) -> None:
        """The launcher's report line (the layers entered), then nothing else of it."""
        while "\n" not in self.buf:
            if not self._read_some(deadline):
                raise TimeoutError()
        line, self.buf = self.buf.split("\n", 1)
        rep = parse_launch_report(line, self.nonce)
        if isinstance(rep, dict):
            self.layers = rep
            return
        raise _Died(rep if isinstance(rep, str) else f"the launcher said {line[:200]!r}")

    def write(self, data: bytes, deadline: float) -> None:
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            r, w, _ = select.select([self.fd], [fd], [], left)
            if r:
                self._read_some(deadline)
            if w:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    continue
                except OSError as e:  # BrokenPipe: the process is gone
                    raise _Died(str(e)) from None

    def kill(self) -> None:
        if self.proc is not None:
            self._finalizer()

    def exit_status(self) -> int | None:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None


def _kill_group(proc: subprocess.Popen, scratch: str) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # not reaped yet: the group id cannot have been reused
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        pass
    for f in (proc.stdin, proc.stdout):
        try:
            if f is not None:
                f.close()
        except OSError:
            pass
    shutil.rmtree(scratch, ignore_errors=True)


class _Repl:
    """A persistent ``coqtop -emacs`` with a loaded preamble (module docstring: the protocol)."""

    def __init__(self, checker: "CoqChecker", preamble: tuple[str, ...]) -> None:
        self.checker = checker
        self.checks = 0
        paths = checker._paths
        self.p = _Process(checker, [paths["coqtop"], "-q", "-emacs", "-native-compiler", "no"], stdin=True)
        try:
            deadline = time.monotonic() + checker.startup_timeout_s
            self.p.read_launch(deadline)
            self.state = self._first_prompt(deadline)
            for k, sentence in enumerate(preamble):
                ok, out = self.command(sentence, deadline)
                if not ok:
                    raise ValueError(f"the preamble fails in Coq at `{sentence[:120]}`: {_error_message(out)}")
            self.base = self.state
        except BaseException:
            self.p.kill()
            raise

    @property
    def layers(self) -> dict[str, str] | None:
        return self.p.layers

    def _first_prompt(self, deadline: float) -> int:
        while True:
            m = None
            for m in _PROMPT.finditer(self.p.buf):
                pass
            if m is not None:
                self.p.buf = self.p.buf[m.end():]
                self.proofs = m.group("proofs")
                return int(m.group("state"))
            if not self.p._read_some(deadline):
                raise TimeoutError()

    def command(self, text: str, deadline: float, candidate: bool = False) -> tuple[bool, str]:
        """Send one sentence and its synchronisation; ``(succeeded, its output)``. The genuine prompt
        is the last one before the sync's echo (module docstring); a second prompt in the answer
        means Coq ran two commands — or the candidate printed one: either way :class:`_Desync`
        (the caller re-checks with a fresh ``coqc``). Raises TimeoutError, _Died, _Desync, _Flood."""
        tag = "cfjax_sync_" + secrets.token_hex(8)
        self.p.buf = ""
        self.p.write((text + "\nCheck " + tag + ".\n").encode("utf-8"), deadline)
        p = self.p
        while True:
            at = p.buf.find(tag)
            if at >= 0 and p.buf.find("</prompt>", at) >= 0:
                break
            if not p._read_some(deadline):
                raise TimeoutError()
        head = p.buf[:at]
        prompts = list(_PROMPT.finditer(head))
        if not prompts:
            raise _Desync("no prompt before the synchronisation")
        genuine = prompts[-1]
        if len(prompts) > 1:
            raise _Desync("more than one prompt in one answer")
        between = head[genuine.end():]
        if not re.fullmatch(r"\s*Toplevel input, characters \d+-\d+:\n> Check ", between):
            raise _Desync("unexpected text before the synchronisation: " + between[:200])
        tail = p.buf[at:]
        after = list(_PROMPT.finditer(tail))
        if not after or int(after[-1].group("state")) != int(genuine.group("state")):
            raise _Desync("the synchronisation changed the state")
        rest = tail[after[-1].end():]
        if rest.strip():
            raise _Desync("output after the synchronisation")
        p.buf = ""
        state = int(genuine.group("state"))
        ok = state != self.state
        self.state = state
        self.proofs = genuine.group("proofs")
        return ok, head[:genuine.start()]

    def check(self, statement: str, pieces: list[_Piece], name: str, goals: bool, deadline: float) -> _Result:
        """One check (the caller then calls :meth:`reset`); raises what :meth:`command` raises.
        ``self.current``: the candidate sentence being run (None outside them), for a timeout."""
        self.checks += 1
        self.current = None
        ok, out = self.command(f"Theorem {name} : {statement}.", deadline)
        if not ok or name not in self.proofs.split("|"):
            raise ValueError(f"the statement fails in Coq: {_error_message(out)}")
        ok, out = self.command("Proof.", deadline)
        if not ok:
            raise _Desync("Proof. failed")
        for k, piece in enumerate(pieces):
            self.current = k
            ok, out = self.command(piece.text, deadline, candidate=True)
            if not ok:
                self.current = None
                msg = _error_message(out)
                status = _resource_status(msg) or "error"
                g = self._show(deadline) if goals and status == "error" else ""
                return _Result(status, k, msg, g)
        self.current = None
        ok, out = self.command("Qed.", deadline, candidate=True)
        if not ok or self.proofs.strip():
            msg = _error_message(out)
            status = _resource_status(msg) or _qed_status(msg)
            g = self._show(deadline) if goals and status != "memory" and self.proofs.strip() else ""
            return _Result(status, None, msg, g)
        ok, out = self.command(f"Print Assumptions {name}.", time.monotonic() + self.checker.assumptions_timeout_s)
        if not ok:
            raise _Desync("Print Assumptions failed: " + _error_message(out))
        closed, msg = _assumptions(out)
        return _Result("proved" if closed else "axiom", None, msg)

    def _show(self, deadline: float) -> str:
        ok, out = self.command("Show.", deadline)
        return _goals_text(out) if ok or out else ""

    def reset(self) -> bool:
        """Back to the state after the preamble; False when the process must be replaced."""
        deadline = time.monotonic() + self.checker.cleanup_timeout_s
        try:
            self.command(f"BackTo {self.base}.", deadline)
        except (TimeoutError, _Died, _Desync, _Flood):
            return False
        return self.state == self.base and not self.proofs.strip()

    def kill(self) -> None:
        self.p.kill()


# ---------------------------------------------------------------------------------------- checker


class CoqChecker:
    """Checks candidate proof bodies with Coq's kernel (module docstring).

    Args:
      timeout_s: wall-clock limit of one check (from the theorem statement through ``Qed``);
        exceeded → ``status="timeout"`` and, persistent, a new process.
      memory_mb: ``RLIMIT_AS`` of the Coq process (``coqtop`` with ``Lia``/``ZArith`` loaded maps
        ≈ 600 MB; exhaustion → ``status="memory"``).
      persistent: one long-lived ``coqtop`` per preamble (else one fresh ``coqc`` per check).
      coqtop: the ``coqtop`` to use (default: the one on ``PATH``; ``coqc`` is found beside it).
      max_processes: persistent processes kept (least recently used is closed first).
      max_checks: checks after which a persistent process is replaced (bounds its CPU limit).
      startup_timeout_s: limit for starting Coq and loading the preamble (a slow machine's problem,
        not the candidate's: exceeding it is ``status="crash"``).
      scratch_mb, scratch_files: bounds of the Coq process's private tmpfs work directory.
      fsize_mb: largest file Coq may write (``coqc``'s ``.vo``).
      max_output_bytes: Coq's output per check beyond which the check ends as ``"memory"``.
      isolation: ``"os"`` (every OS layer the machine offers) or ``"none"`` (resource limits only;
        comparisons and machines without namespaces — never for untrusted proofs).
      scratch_root: where scratch directories are made (default: the system's temporary directory).
      max_proof_chars: longer proofs are refused.
      assumptions_timeout_s: budget of the final ``Print Assumptions`` (after a successful ``Qed``),
        apart from ``timeout_s``: it walks every constant the proof term reaches, opaque bodies
        included (≈ 0.3 s for a ``lia`` proof, whose certificate checker's correctness proof is
        large), which is the checker's cost rather than the candidate's.
    """

    def __init__(self, *, timeout_s: float = 5.0, memory_mb: int = 1024, persistent: bool = True,
                 coqtop: str | None = None, max_processes: int = 4, max_checks: int = 500,
                 startup_timeout_s: float = 60.0, scratch_mb: float = SCRATCH_MB, scratch_files: int = SCRATCH_FILES,
                 fsize_mb: float = 16.0, max_output_bytes: int = 4 << 20, isolation: str = "os",
                 scratch_root: str | None = None, max_proof_chars: int = _MAX_PROOF_CHARS,
                 assumptions_timeout_s: float = 30.0) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if isolation not in ("os", "none"):
            raise ValueError(f"isolation must be 'os' or 'none', got {isolation!r}")
        if max_processes < 1:
            raise ValueError("max_processes must be at least 1")
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.persistent = bool(persistent)
        self.coqtop = coqtop or "coqtop"
        self.max_processes = int(max_processes)
        self.max_checks = int(max_checks)
        self.startup_timeout_s = float(startup_timeout_s)
        self.cleanup_timeout_s = 10.0
        self.assumptions_timeout_s = float(assumptions_timeout_s)
        self.scratch_mb = float(scratch_mb)
        self.scratch_files = int(scratch_files)
        self.fsize_bytes = int(fsize_mb * 1024 * 1024)
        self.max_output_bytes = int(max_output_bytes)
        self.isolation = isolation
        self.scratch_root = scratch_root
        self.max_proof_chars = int(max_proof_chars)
        self._repls: OrderedDict[tuple[str, ...], _Repl] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop every persistent process (idempotent)."""
        with self._lock:
            repls, self._repls = list(self._repls.values()), OrderedDict()
        for r in repls:
            r.kill()

    def __enter__(self) -> "CoqChecker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_repls"] = OrderedDict()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def _paths(self) -> dict:
        p = _coq_paths(self.coqtop)
        if p is None:
            raise RuntimeError(INSTALL_HINT)
        return p

    # ------------------------------------------------------------------ sandbox
    def _argv(self, program: list[str], work: str, scratch: str, nonce: str) -> list[str]:
        paths = self._paths
        read = [paths["stdlib"]] + ([paths["corelib"]] if paths["corelib"] else []) + list(paths["libs"])
        if os.path.isdir("/usr/share/coq"):
            read.append("/usr/share/coq")
        listing = [os.path.dirname(paths["stdlib"])]
        env = {"PATH": "/nonexistent", "LANG": "C.UTF-8", "HOME": work, "OCAMLFIND_CONF": "/dev/null",
               "OCAMLPATH": os.path.dirname(paths["stdlib"]), "XDG_DATA_HOME": "/nonexistent",
               "XDG_DATA_DIRS": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent", "COQLIB": paths["stdlib"]}
        if paths["corelib"]:
            env["COQCORELIB"] = paths["corelib"]
        if self.persistent and program[0] == paths["coqtop"]:
            cpu = int(self.max_checks * (self.timeout_s + 1) + self.startup_timeout_s)
        else:
            cpu = int(self.timeout_s + self.startup_timeout_s) + 1
        limits = {"RLIMIT_AS": self.memory_mb << 20, "RLIMIT_CPU": cpu, "RLIMIT_FSIZE": self.fsize_bytes,
                  "RLIMIT_NOFILE": 64, "RLIMIT_CORE": 0, "RLIMIT_NPROC": 0}
        return launch_argv(program, cwd=work, scratch=scratch, env=env, read=read, listing=listing, limits=limits,
                           nonce=nonce, isolation=self.isolation == "os", scratch_mb=self.scratch_mb,
                           scratch_files=self.scratch_files)

    def _missing(self, layers: dict[str, str] | None) -> tuple[str, ...]:
        if self.isolation != "os":
            return tuple(LAYERS)
        return tuple(layers_missing(layers)) if isinstance(layers, dict) else tuple(LAYERS)

    # ------------------------------------------------------------------ checking
    def check(self, preamble: str, statement: str, proof: str, *, goals: bool = False,
              name: str = "cfjax_goal") -> CoqVerdict:
        """Check ``proof`` (tactic sentences) of ``Theorem name : statement`` after ``preamble``.

        ``ValueError`` for a bad preamble, statement or name (the caller's error, also when Coq
        rejects them); every judgement of the candidate is a :class:`CoqVerdict`."""
        t0 = time.perf_counter()
        paths = self._paths
        pre = _validate_preamble(preamble or "", paths["stdlib"])
        stmt = _validate_statement(statement)
        name = _validate_name(name)

        def verdict(r: _Result, layers=None, pieces=()) -> CoqVerdict:
            idx = r.index
            line = pieces[idx].line if idx is not None and idx < len(pieces) else None
            failing = pieces[idx].text if idx is not None and idx < len(pieces) else ""
            return CoqVerdict(r.status == "proved", r.status, idx, line, failing, r.message, r.goals if goals else "",
                              time.perf_counter() - t0, self._missing(layers) if layers is not False else ())

        if len(proof) > self.max_proof_chars:
            return verdict(_Result("refused", None, f"the proof has {len(proof)} characters "
                                                     f"(limit {self.max_proof_chars})"), False)
        pieces, problem = _scan(proof)
        for k, piece in enumerate(pieces):
            why = _refusal(piece.text)
            if why is not None:
                return verdict(_Result("refused", k, why), False, pieces)
        if problem is not None:
            kind, pos, line = problem
            text = proof[pos:].strip()
            shown = pieces + [_Piece(text[:400], pos, line)]
            what = {"comment": "Error: Syntax error: unterminated comment.",
                    "string": "Error: Syntax error: unterminated string.",
                    "sentence": "Error: Syntax error: the sentence does not end with '.'."}[kind]
            return verdict(_Result("error", len(pieces), what), False, shown)
        try:
            if self.persistent:
                r, layers = self._check_persistent(pre, stmt, pieces, name, goals)
            else:
                r, layers = self._check_fresh(pre, stmt, pieces, name, goals)
        except OSError as e:  # the host could not start Coq (no temporary directory, no process)
            r, layers = _Result("crash", None, f"Coq could not be run: {type(e).__name__}: {e}"), None
        return verdict(r, layers, pieces)

    # --- persistent
    def _repl(self, pre: tuple[str, ...]) -> _Repl:
        r = self._repls.pop(pre, None)
        if r is None:
            r = _Repl(self, pre)
        self._repls[pre] = r
        while len(self._repls) > self.max_processes:
            _, old = self._repls.popitem(last=False)
            old.kill()
        return r

    def _drop(self, pre: tuple[str, ...]) -> None:
        r = self._repls.pop(pre, None)
        if r is not None:
            r.kill()

    def _check_persistent(self, pre, stmt, pieces, name, goals) -> tuple[_Result, dict | None]:
        with self._lock:
            try:
                repl = self._repl(pre)
            except (TimeoutError, _Died, _Desync, _Flood) as e:
                return _Result("crash", None, f"Coq could not be started with this preamble ({_why(e)})"), None
            layers = repl.layers
            deadline = time.monotonic() + self.timeout_s
            try:
                result = repl.check(stmt, pieces, name, goals, deadline)
            except ValueError:
                self._reset_or_drop(pre, repl)
                raise
            except TimeoutError:
                self._drop(pre)
                return self._timeout_result(repl, pieces), layers
            except _Flood:
                self._drop(pre)
                return _Result("memory", None, f"Coq printed more than {self.max_output_bytes >> 20} MB"), layers
            except _Died as e:
                self._drop(pre)
                return self._died_result(repl.p, str(e)), layers
            except _Desync:
                self._drop(pre)
                return self._check_fresh(pre, stmt, pieces, name, goals)
            if result.status == "memory" or repl.checks >= self.max_checks:
                self._drop(pre)
            else:
                self._reset_or_drop(pre, repl)
            return result, layers

    def _reset_or_drop(self, pre, repl: _Repl) -> None:
        if not repl.reset():
            self._drop(pre)

    def _timeout_result(self, repl: _Repl, pieces) -> _Result:
        return _Result("timeout", getattr(repl, "current", None),
                       f"the check did not finish within {self.timeout_s:g} s")

    def _died_result(self, p: _Process, why: str) -> _Result:
        rc = p.exit_status()
        text = p.buf
        status = _resource_status(text) or ("timeout" if rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU) else "crash")
        how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"
        last = next((ln for ln in reversed(_clean(text).strip().splitlines()) if ln.strip()), "")
        return _Result(status, None, _trim(f"Coq stopped ({how}). {last}", _MAX_MESSAGE))

    # --- fresh
    def _script(self, pre, stmt, pieces, name, *, upto: int | None = None, show: bool = False
                ) -> tuple[str, list[tuple[int, int]], list[tuple[int, int]], int]:
        """The file's text, each command's byte range, each command's line range, and the index of
        the first candidate command."""
        cmds = list(pre) + [f"Theorem {name} : {stmt}.", "Proof."]
        first = len(cmds)
        body = pieces if upto is None else pieces[:upto]
        cmds += [p.text for p in body]
        if show:
            cmds.append("Show.")
        else:
            cmds += ["Qed.", f"Print Assumptions {name}."]
        ranges, lines, pos, line = [], [], 0, 1
        out = []
        for c in cmds:
            b = c.encode("utf-8")
            ranges.append((pos, pos + len(b)))
            n = c.count("\n")
            lines.append((line, line + n))
            out.append(c + "\n")
            pos += len(b) + 1
            line += n + 1
        return "".join(out), ranges, lines, first

    def _run_coqc(self, text: str, n_pre: int, n_qed: int | None = None) -> "_Run":
        """Run ``coqc -time`` on ``text``; the candidate's clock starts once the ``n_pre`` preamble
        commands have printed their ``Chars`` lines (at once without a preamble); once ``n_qed``
        commands have (the ``Qed``), ``Print Assumptions`` gets its own budget."""
        paths = self._paths
        p = _Process(self, [paths["coqc"], "-q", "-time", "-native-compiler", "no", _FILE + ".v"],
                     files={_FILE + ".v": text}, stdin=False)
        ranges: list[tuple[int, int]] = []
        try:
            startup = time.monotonic() + self.startup_timeout_s
            try:
                p.read_launch(startup)
            except TimeoutError:
                return _Run(p.buf, ranges, None, "startup", p.layers)
            except (_Died, _Flood) as e:
                return _Run(p.buf + f"\n{_why(e)}", ranges, p.exit_status(), "died", p.layers)
            deadline = time.monotonic() + self.timeout_s if n_pre == 0 else startup
            scanned = 0
            stop = None
            while True:
                try:
                    more = p._read_some(deadline)
                except _Died:
                    more = None
                except _Flood:
                    stop = "flood"
                    break
                nl = p.buf.rfind("\n")
                if nl >= scanned:
                    for m in re.finditer(r"^Chars (\d+) - (\d+) \[", p.buf[scanned:nl + 1], re.M):
                        ranges.append((int(m.group(1)), int(m.group(2))))
                        if len(ranges) == n_pre and n_pre > 0:
                            deadline = time.monotonic() + self.timeout_s
                        if n_qed is not None and len(ranges) == n_qed:
                            deadline = time.monotonic() + self.assumptions_timeout_s
                    scanned = nl + 1
                if more is None:
                    break
                if not more:
                    stop = "timeout" if len(ranges) >= n_pre else "startup"
                    break
            rc = p.exit_status() if stop is None else None
            return _Run(p.buf, ranges, rc, stop, p.layers)
        finally:
            p.kill()

    def _check_fresh(self, pre, stmt, pieces, name, goals) -> tuple[_Result, dict | None]:
        text, want, lines, first = self._script(pre, stmt, pieces, name)
        out, got, rc, stop, layers = self._run_coqc(text, len(pre), first + len(pieces) + 1)
        if stop == "died":
            return self._fresh_died(rc, out, layers)
        if stop == "startup":
            return _Result("crash", None, f"Coq did not load the preamble within {self.startup_timeout_s:g} s"), layers
        if stop == "flood":
            return _Result("memory", None, f"Coq printed more than {self.max_output_bytes >> 20} MB"), layers
        if stop == "timeout":
            done = len(got) - first
            idx = done if 0 <= done < len(pieces) else None
            if done < 0:  # still in the statement
                idx = None
            return _Result("timeout", idx, f"the check did not finish within {self.timeout_s:g} s"), layers
        if rc == 0:
            if got != want:
                return _Result("refused", None, "Coq read the proof's sentences differently from the checker "
                                                "(the sentence boundaries disagree)"), layers
            seg = _segment(out, len(want) - 1)
            closed, msg = _assumptions(seg)
            return _Result("proved" if closed else "axiom", None, msg), layers
        # a failure: where?
        tail = _after_last_chars(out)
        loc = _error_location(tail)
        msg = _error_message(tail[loc[2]:] if loc else tail)
        res = _resource_status(msg) or _resource_status(tail)
        if loc is None:
            if res:
                return _Result(res, _running(got, first, pieces), msg), layers
            return self._fresh_died(rc, out, layers)
        cmd = next((k for k, (a, b) in enumerate(lines) if a <= loc[0] <= b), None)
        if cmd is None:
            return self._fresh_died(rc, out, layers)
        if cmd < len(pre):
            raise ValueError(f"the preamble fails in Coq at `{pre[cmd][:120]}`: {msg}")
        if cmd < first:
            raise ValueError(f"the statement fails in Coq: {msg}")
        if cmd < first + len(pieces):
            idx = cmd - first
            status = res or "error"
            g = self._fresh_goals(pre, stmt, pieces, name, idx) if goals and status == "error" else ""
            return _Result(status, idx, msg, g), layers
        if cmd == first + len(pieces):  # Qed
            status = res or _qed_status(msg)
            g = self._fresh_goals(pre, stmt, pieces, name, len(pieces)) if goals and status != "memory" else ""
            return _Result(status, None, msg, g), layers
        return _Result("crash", None, "Print Assumptions failed: " + msg), layers

    def _fresh_died(self, rc, out, layers) -> tuple[_Result, dict | None]:
        text = _clean(out)
        status = _resource_status(text) or ("timeout" if rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU) else "crash")
        how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"
        last = next((ln for ln in reversed(text.strip().splitlines()) if ln.strip()), "")
        return _Result(status, None, _trim(f"Coq stopped ({how}). {last}", _MAX_MESSAGE)), layers

    def _fresh_goals(self, pre, stmt, pieces, name, upto: int) -> str:
        text, want, _lines, first = self._script(pre, stmt, pieces, name, upto=upto, show=True)
        out, got, rc, stop, _layers = self._run_coqc(text, len(pre))
        if stop is not None or got != want:
            return ""
        return _goals_text(_segment(out, len(want) - 1))


def _why(e: BaseException) -> str:
    return f"{type(e).__name__.lstrip('_')}: {e}" if str(e) else type(e).__name__.lstrip("_")


_CHARS_LINE = re.compile(r"^Chars \d+ - \d+ \[.*$", re.M)


def _segment(out: str, k: int) -> str:
    """The output between the ``k-1``-th and the ``k``-th ``Chars`` line (a command's own output is
    printed before its timing line)."""
    marks = list(_CHARS_LINE.finditer(out))
    if k >= len(marks):
        return ""
    start = marks[k - 1].end() + 1 if k >= 1 else 0
    return out[start:marks[k].start()]


def _after_last_chars(out: str) -> str:
    marks = list(_CHARS_LINE.finditer(out))
    return out[marks[-1].end() + 1:] if marks else out


_LOC = re.compile(r'^File "[^"\n]*", line (\d+), characters (-?\d+)--?\d+:\n(?=Error)', re.M)


def _error_location(text: str) -> tuple[int, int, int] | None:
    """``(line, column, offset of the message)`` of the first located error in ``text``."""
    m = _LOC.search(text)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), m.end()


def _running(got, first, pieces) -> int | None:
    done = len(got) - first
    return done if 0 <= done < len(pieces) else None
