"""Math user rows (``--suite jsonl:``; cfjax/domains/math/user.py): load, check golds by Coq, refuse bad rows
in one line, and run through the world. Skipped without Coq (the install line says how)."""

from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("coqc") is None, reason="Coq is not installed: apt-get install coq "
                                "(Debian/Ubuntu) — the math suite needs its kernel")

ROWS = [
    {"domain": "math", "statement": "forall n : nat, n + 0 = n", "imports": ["Arith", "Lia"], "gold": "intros n.\nlia."},
    {"domain": "math", "statement": "forall x : Z, 0 <= x * x", "imports": ["ZArith", "Lia"],
     "scope": "Z_scope", "gold": "intros x.\nnia.", "start": "intros x.\nlia."},
    {"domain": "math", "statement": "forall l : list nat, length (rev l) = length l", "imports": ["List"],
     "start": "intros l.\nreflexivity."},
]


def _file(tmp_path, rows, name="m.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_rows_load_and_the_world_judges_them(tmp_path):
    from cfjax.domains import build_suite, register_jsonl

    name = register_jsonl(f"jsonl:{_file(tmp_path, ROWS)}")
    suite = build_suite(name, tmp_path / "suite")
    assert [t.domain for t in suite.tasks] == ["coq"] * 3
    assert "Proof" not in suite.tasks[0].question and "forall n : nat, n + 0 = n" in suite.tasks[0].context
    with suite.world() as w:
        t0, t1, t2 = suite.tasks
        assert w.evaluate(t0, suite.keys[t0.task_id].gold).solved
        o = w.evaluate(t1, "intros x.\nlia.")  # lia cannot do the product
        assert not o.solved and "Sentence 2" in o.feedback
        assert w.evaluate(t2, "intros l.\napply rev_length.").solved  # no gold needed: the kernel decides
    draft = suite.scripted_domain().draft(t2, 0, __import__("random").Random(0), None)
    assert draft.startswith("intros l.")  # the start proof with one rule edit (gold-free)


@pytest.mark.parametrize("row, field", [
    ({"domain": "math", "statement": "forall n : nat, n = n", "gold": "intros n.\nlia.\nexact I."}, "gold"),
    ({"domain": "math", "statement": "forall n : nat, n = n", "imports": ["Arith", "os.system"]}, "imports"),
    ({"domain": "math", "statement": "True. Axiom f : False"}, "statement"),
])
def test_a_bad_row_is_one_line_naming_its_field(tmp_path, row, field):
    from cfjax.domains import register_jsonl
    from cfjax.domains.jsonl import JSONLError

    with pytest.raises(JSONLError) as e:
        register_jsonl(f"jsonl:{_file(tmp_path, [row] + ROWS[:1], name=f'bad_{field}.jsonl')}")
    assert f"field {field!r}" in str(e.value) and "\n" not in str(e.value)
