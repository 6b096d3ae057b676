"""The math suite's data (``cfjax/domains/math/theorems.py``): every gold proof checks, every slip fails.

Shape tests (no Coq needed): counts per family, variant and environment, unique names and
``(env_id, statement)`` pairs, well-formed sentences and slips, questions that never name a tactic or
a lemma of the gold.

Kernel tests (need ``coqc``; skipped with one line otherwise):

* **golds** — one ``coqc`` run per environment over a file holding all of its theorems with their gold
  proofs, then one ``Print Assumptions`` over a tuple of all of them, which must print "Closed under
  the global context" (no axiom anywhere). Observed: about 1 s per environment, 5 s in all.
* **slips** — one ``coqtop -emacs`` session per environment, fed every slipped proof as its own
  ``Theorem``, each followed by ``Abort.``. ``coqtop`` keeps going after an error, and its ``-emacs``
  prompt ``<prompt>NAME < … </prompt>`` (on stderr, before each sentence is read) names the proof
  that is open; an ``Error:`` printed after a prompt naming a slip's proof is an error of one of that
  proof's sentences or of its ``Qed``. This is exact, not an approximation: up to the first error the
  session runs the same sentences on the same state as ``coqc`` on the slipped file would, so "an
  error inside the slip's proof" ⇔ "``coqc`` rejects the slipped proof". (A ``Fail`` wrapper around
  one sentence would need the failing sentence known in advance, and a single-tactic encoding with
  ``;``/``[> … ]`` is not equivalent to sentence-by-sentence execution under bullets.) Every gold is
  run in the same session as a control and must show no error, so a broken prompt parser cannot
  pass. Observed: about 0.8 s per environment, 4 s for the 204 slips. Where ``coqtop`` is missing
  but ``coqc`` is not, each slip is its own ``coqc`` run on 2 threads (50–90 s on 2 cores).

The development check that wrote these numbers also ran every slip as its own ``coqc`` process and
found the same 204 failures.
"""

from __future__ import annotations

import collections
import importlib.util
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[3] / "cfjax" / "domains" / "math" / "theorems.py"
_SKIP = "Coq is not installed: apt-get install coq (Debian/Ubuntu) — the math suite needs its kernel"


def _load():
    """The data module as a plain file (it imports nothing from cfjax)."""
    name = "_cfjax_math_theorems_plain"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


T = _load()
BY_ENV: dict[str, list] = collections.defaultdict(list)
for _th in T.THEOREMS:
    BY_ENV[_th.env_id].append(_th)

_FORBIDDEN = re.compile(r"\b(admit|admitted|Admitted|Axiom|Axioms|Abort|Parameter|Conjecture|Hypothesis|"
                        r"Variable|Require|Import|Proof|Qed|Defined|Fail|Section|Module)\b")
_TACTIC_WORDS = ("intros", "induction", "destruct", "rewrite", "lia", "nia", "ring", "reflexivity",
                 "discriminate", "inversion", "injection", "simpl", "f_equal", "omega", "auto", "eauto")
_BULLET = re.compile(r"^([-+*]) ")


def _body(th, proof) -> str:
    """``script`` without the preamble (several theorems share one file)."""
    pre = T.ENVS[th.env_id].preamble.rstrip("\n") + "\n"
    text = T.script(th, proof)
    assert text.startswith(pre)
    return text[len(pre):]


# --------------------------------------------------------------------------- shape (no Coq)


def test_module_is_standalone():
    src = _PATH.read_text(encoding="utf-8")
    assert not re.search(r"^\s*(from|import)\s+cfjax", src, re.M)
    assert not (_PATH.parent / "theorems").exists()


def test_counts():
    assert len(T.THEOREMS) == 204
    assert set(T.ENVS) == {"nat_arith", "nat_bool", "nat_lists", "z_arith", "z_numtheory"}
    fam = collections.Counter(th.family for th in T.THEOREMS)
    assert set(fam) == set(T.FAMILIES) and all(n == 34 for n in fam.values())
    fv = collections.Counter((th.family, th.variant) for th in T.THEOREMS)
    for f in T.FAMILIES:
        assert (fv[f, "base"], fv[f, "look_alike"], fv[f, "new_surface"]) == (22, 7, 5), f
    envs_of = collections.defaultdict(set)
    for th in T.THEOREMS:
        envs_of[th.family].add(th.env_id)
    assert all(len(e) >= 3 for e in envs_of.values()), envs_of
    assert {e: len(v) for e, v in BY_ENV.items()} == {
        "nat_arith": 54, "nat_bool": 37, "nat_lists": 49, "z_arith": 35, "z_numtheory": 29}


def test_docstring_counts_match_the_data():
    doc = T.__doc__
    envs = list(T.ENVS)
    c = collections.Counter((th.family, th.env_id, th.variant) for th in T.THEOREMS)
    for fam in T.FAMILIES:
        row = re.search(rf"^{fam}\s+(.*)$", doc, re.M).group(1).split()
        want = ["/".join(str(c[fam, e, v]) for v in T.VARIANTS) if any(c[fam, e, v] for v in T.VARIANTS)
                else "–" for e in envs] + [str(sum(c[fam, e, v] for e in envs for v in T.VARIANTS))]
        assert row == want, (fam, row, want)
    total = re.search(r"^total\s+(.*)$", doc, re.M).group(1).split()
    assert total == [str(len(BY_ENV[e])) for e in envs] + [str(len(T.THEOREMS))]


def test_ids_names_and_uniqueness():
    tids = [th.tid for th in T.THEOREMS]
    names = [th.name for th in T.THEOREMS]
    assert len(set(tids)) == len(tids) and len(set(names)) == len(names)
    assert len({(th.env_id, th.statement) for th in T.THEOREMS}) == len(T.THEOREMS)
    assert len({(th.env_id, th.gold, th.statement) for th in T.THEOREMS}) == len(T.THEOREMS)
    for th in T.THEOREMS:
        assert th.env_id in T.ENVS and th.family in T.FAMILIES and th.variant in T.VARIANTS
        assert re.fullmatch(rf"{th.env_id}/{th.family}/{th.variant}/\d\d", th.tid), th.tid
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", th.name), th.name


def test_sentences_and_slips_are_well_formed():
    for th in T.THEOREMS:
        assert th.gold and isinstance(th.gold, tuple)
        assert not th.statement.rstrip().endswith(".")
        for s in th.gold + ((th.slip[1],) if th.slip[1] else ()):
            assert s == s.strip() and s.endswith(".") and "\n" not in s, (th.tid, s)
            core = _BULLET.sub("", s)
            assert not core[:1] in "-+*{}", (th.tid, s)
            assert "{" not in s and "}" not in s, (th.tid, s)
            assert not _FORBIDDEN.search(s), (th.tid, s)
            assert re.fullmatch(r"[^.]*(\.[^\s.][^.]*)*\.", s), (th.tid, s)   # one sentence
        assert not _FORBIDDEN.search(th.statement), th.tid
        i, text = th.slip
        assert 0 <= i < len(th.gold), th.tid
        assert text != th.gold[i], th.tid
        assert T.slipped(th) != th.gold


def test_family_slip_shapes():
    """Each slip is its family's documented mistake (module docstring's table)."""
    for th in T.THEOREMS:
        i, text = th.slip
        g = _BULLET.sub("", th.gold[i])
        r = _BULLET.sub("", text) if text else None
        look = th.variant == "look_alike"
        if th.family == "missing_intros":
            assert g.startswith("intros "), th.tid
            if look:
                assert r.startswith("intros ") and len(r.split()) > len(g.split()), th.tid
            else:
                assert r is None, th.tid
        elif th.family == "induction_var":
            assert g.startswith("induction ") and r.startswith("induction ")
            assert g.split()[1] != r.split()[1], th.tid
        elif th.family == "rewrite_dir":
            assert g.startswith("rewrite ") and r.startswith("rewrite ")
            assert g.replace("<- ", "") == r.replace("<- ", ""), th.tid
            assert ("<-" in g) == (not look) and ("<-" in r) == look, th.tid
        elif th.family == "wrong_lemma":
            assert g.split()[0] == r.split()[0] and g.split()[0] in ("rewrite", "apply"), th.tid
        elif th.family == "lia_nia":
            if look:
                assert (g, r) == ("lia.", "ring."), th.tid
            else:
                assert g == "nia." and r == "lia.", th.tid
        elif th.family == "forgotten_case":
            if look:
                assert r.startswith("destruct ") and not any("destruct" in s for s in th.gold), th.tid
            else:
                assert g.startswith("destruct ") and r is None, th.tid


def test_questions_never_name_the_gold():
    for th in T.THEOREMS:
        q = th.question
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_']*", q))
        assert not words & set(_TACTIC_WORDS), (th.tid, words & set(_TACTIC_WORDS))
        for s in th.gold:
            for tok in re.findall(r"[A-Za-z_][A-Za-z0-9_'.]*[A-Za-z0-9_']", s):
                if "_" in tok or "." in tok:
                    assert tok not in q, (th.tid, tok)
        cues = T.CUES[th.family][th.variant]
        assert any(c in q.lower() for c in cues), (th.tid, cues)
        assert q.strip().endswith("."), th.tid


def test_script_text():
    th = T.THEOREMS[0]
    text = T.script(th, th.gold)
    assert text.startswith(T.ENVS[th.env_id].preamble)
    lines = text.splitlines()
    i = lines.index(f"Theorem {th.name} : {th.statement}.")
    assert lines[i + 1] == "Proof." and lines[-1] == "Qed."
    assert lines[i + 2:-1] == list(th.gold)


# --------------------------------------------------------------------------- the kernel


@pytest.fixture(scope="module")
def coqc():
    path = shutil.which("coqc")
    if path is None:
        pytest.skip(_SKIP)
    return path


def _gold_file(env: str) -> tuple[str, dict[int, str]]:
    """All of ``env``'s golds in one file, one Print Assumptions over their tuple; line → theorem name."""
    lines_of: dict[int, str] = {}
    text = T.ENVS[env].preamble
    for th in BY_ENV[env]:
        start = text.count("\n") + 1
        chunk = _body(th, th.gold)
        for k in range(chunk.count("\n")):
            lines_of[start + k] = th.name
        text += chunk
    names = [th.name for th in BY_ENV[env]]
    text += f"Definition all_golds_{env} := ({', '.join(names)}).\nPrint Assumptions all_golds_{env}.\n"
    return text, lines_of


@pytest.mark.parametrize("env", sorted(T.ENVS))
def test_golds_check_closed(env, coqc, tmp_path):
    text, lines_of = _gold_file(env)
    f = tmp_path / f"gold_{env}.v"
    f.write_text(text, encoding="utf-8")
    r = subprocess.run([coqc, "-q", f.name], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        m = re.search(r'line (\d+)', r.stderr)
        where = lines_of.get(int(m.group(1)), "?") if m else "?"
        pytest.fail(f"{env}: a gold proof is rejected (theorem {where}):\n{r.stderr[-2000:]}")
    assert "Closed under the global context" in r.stdout, r.stdout[-2000:]
    assert "Axioms:" not in r.stdout


_PROMPT = re.compile(r"<prompt>(\S+) < \d+ \|[^|<]*\| \d+ < </prompt>")


def _slip_name(th) -> str:
    return f"{th.name}_slip"


def _ctl_name(th) -> str:
    return f"{th.name}_ctl"


def _session_text(env: str) -> str:
    out = [T.ENVS[env].preamble]
    for th in BY_ENV[env]:
        for name, proof in ((_slip_name(th), T.slipped(th)), (_ctl_name(th), th.gold)):
            out.append(f"Theorem {name} : {th.statement}.\nProof.\n")
            out.extend(s + "\n" for s in proof)
            out.append("Qed.\nAbort.\n")
    return "".join(out)


def _errors_by_proof(stderr: str) -> tuple[set[str], set[str]]:
    """(proofs that were open at some prompt, proofs with an error after one of their prompts)."""
    parts = _PROMPT.split(stderr)
    seen, failed = set(), set()
    # parts = [before, name1, after1, name2, after2, ...]
    for name, after in zip(parts[1::2], parts[2::2]):
        seen.add(name)
        if re.search(r"^(Error:|Anomaly)", after, re.M):
            failed.add(name)
    return seen, failed


def _slips_by_coqtop(env: str, coqtop: str, cwd: Path) -> dict[str, bool]:
    r = subprocess.run([coqtop, "-q", "-emacs"], input=_session_text(env), cwd=cwd, capture_output=True,
                       text=True, timeout=600)
    seen, failed = _errors_by_proof(r.stderr)
    for th in BY_ENV[env]:
        assert _slip_name(th) in seen and _ctl_name(th) in seen, (th.tid, "the statement did not start a proof")
        assert _ctl_name(th) not in failed, (th.tid, "the gold control failed in the session: parser or data bug")
    return {th.tid: _slip_name(th) in failed for th in BY_ENV[env]}


def _slips_by_coqc(env: str, coqc: str, cwd: Path) -> dict[str, bool]:
    def one(th):
        f = cwd / f"{th.name}.v"
        f.write_text(T.script(th, T.slipped(th)), encoding="utf-8")
        r = subprocess.run([coqc, "-q", f.name], cwd=cwd, capture_output=True, text=True, timeout=120)
        return th.tid, r.returncode != 0

    with ThreadPoolExecutor(2) as ex:
        return dict(ex.map(one, BY_ENV[env]))


@pytest.mark.parametrize("env", sorted(T.ENVS))
def test_slips_fail(env, coqc, tmp_path):
    coqtop = shutil.which("coqtop")
    fails = _slips_by_coqtop(env, coqtop, tmp_path) if coqtop else _slips_by_coqc(env, coqc, tmp_path)
    accepted = sorted(tid for tid, failed in fails.items() if not failed)
    assert not accepted, f"these slips are accepted by Coq: {accepted}"
    assert len(fails) == len(BY_ENV[env])


def test_session_parser_sees_errors(coqc, tmp_path):
    """The prompt parser on a tiny session: one failing and one passing proof."""
    coqtop = shutil.which("coqtop")
    if coqtop is None:
        pytest.skip("coqtop is not installed (the slip test falls back to one coqc per slip)")
    text = ("Theorem p_bad : forall n : nat, n + 0 = n.\nProof.\nintros n.\nreflexivity.\nQed.\nAbort.\n"
            "Theorem p_good : forall n : nat, 0 + n = n.\nProof.\nintros n.\nreflexivity.\nQed.\nAbort.\n")
    r = subprocess.run([coqtop, "-q", "-emacs"], input=text, cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    seen, failed = _errors_by_proof(r.stderr)
    assert {"p_bad", "p_good"} <= seen
    assert "p_bad" in failed and "p_good" not in failed
