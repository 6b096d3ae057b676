"""Every one-unit rule edit of every gold proof, checked by Coq (the issue-25 census).

    python -m cfjax.domains.math.census            # prints the counts by family and by operator

A proof is irrelevant to its theorem's truth, so an edit that Coq still accepts is an equivalent
proof (the same theorem, kernel-checked, no axiom); every other edit fails. The census states how many
of each there are, per family and per edit operator (:meth:`cfjax.domains.math.edits.CoqEdits.rule_edits`),
so a reader sees how often a one-sentence change of a correct proof stays correct.
"""

from __future__ import annotations

import collections
import re
import tempfile
import time


def _operator(before: str, after: str) -> str:
    if not after:
        return "delete"
    if len(after) > len(before) and after.endswith(before):
        return "insert intros" if after.startswith("intros") else "insert case split"
    b, a = before.split()[0].lstrip("-+*"), after.split()[0].lstrip("-+*")
    if re.search(r"\brewrite\b", before) and ("<-" in before) != ("<-" in after):
        return "rewrite direction"
    if b in ("induction", "destruct") and b == a:
        return f"{b} variable"
    if b.rstrip(".") in ("lia", "nia", "ring", "reflexivity", "auto", "eauto", "trivial", "congruence"):
        return "closer"
    return "lemma name"


def census(log=print) -> dict:
    from cfjax.domains.math import MathSuite

    suite = MathSuite.build(tempfile.mkdtemp(prefix="cfjax-math-census-"))
    ed = suite.edits
    by_family: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    t0 = time.perf_counter()
    with suite.world() as w:
        for t in suite.tasks:
            key = suite.keys[t.task_id]
            gold = ed.normalize(key.gold)
            for i, text in ed.rule_edits(gold):
                new = ed.replace_unit(gold, i, text)
                d = ed.diff_units(gold, new)
                o = w.evaluate(t, new)
                verdict = "equivalent" if o.solved else "fails"
                by_family[key.family][verdict] += 1
                by_op[_operator(d[1].text, d[2].text) if d else "other"][verdict] += 1
    total = sum((c for c in by_family.values()), collections.Counter())
    log(f"{sum(total.values())} one-unit rule edits of {len(suite.tasks)} gold proofs: "
        f"{total['fails']} fail, {total['equivalent']} are equivalent proofs Coq accepts "
        f"({time.perf_counter() - t0:.0f} s)")
    for name, table in (("family", by_family), ("operator", by_op)):
        log(f"by {name}: " + "; ".join(f"{k} {v['fails']} fail / {v['equivalent']} equivalent"
                                        for k, v in sorted(table.items())))
    return {"total": dict(total), "by_family": {k: dict(v) for k, v in by_family.items()},
            "by_operator": {k: dict(v) for k, v in by_op.items()}}


if __name__ == "__main__":
    census()
