"""Cost of one Coq proof check: the persistent checker (one ``coqtop`` per preamble) vs one fresh ``coqc``.

Workload: 30 proof bodies over three preambles (``nat`` with ``Arith``/``Lia``, ``Z`` with ``ZArith``/
``Lia``, lists with ``List``) — 15 correct, 15 failing as a model's drafts fail (a wrong tactic, an
unknown lemma, an unfinished proof, ``admit``, a syntax error). Both checkers run under every OS layer
the machine offers (:mod:`cfjax.sandbox`), with the same bounds.

* **start cost** — the first check of each preamble: for the persistent checker it starts the sandboxed
  ``coqtop`` and loads the preamble; for the fresh checker it is the first ``coqc`` of the run (cold
  caches). Reported apart from the steady state.
* **steady state** — ``--rounds`` rounds over the 30 proofs after that, the two checkers interleaved per
  proof (machine load hits both alike): median and interquartile range of the time per check, and
  the ratio of the medians (fresh ÷ persistent). The fresh checker pays Coq's start and the preamble's
  loading on every check; the persistent one only the sentences.

The two checkers' verdicts (status, failing sentence, line, message) must be identical; the run stops
otherwise.

    python benchmarks/coq_check.py [--rounds 3] [--cores N] [--out FILE.json]

Threads: Coq is single-threaded; each check's Coq process is a child of this one (reaped after each
fresh check, long-lived for the persistent checker, whose CPU time is therefore not in the
CPU/wall column). ``--cores`` (default: every core this process may use) binds this process and its
children to that many cores. Results go to ``benchmarks/results/coq_check.json`` (``meta`` +
``tables``); ``python benchmarks/render.py`` puts the table into RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import finish_meta, fmt_ratio, fmt_s, make_meta, quartiles, setup_threads, start_load  # noqa: E402
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

SOURCES = ["benchmarks/_bench.py", "cfjax/domains/math/coq.py", "cfjax/sandbox"]

NAT = "Require Import Arith Lia."
ZED = "Require Import ZArith Lia.\nOpen Scope Z_scope."
LST = "Require Import List Arith.\nImport ListNotations."

#: (preamble, statement, proof, expected status)
PROOFS = [
    (NAT, "forall n : nat, n + 0 = n", "intros n. lia.", "proved"),
    (NAT, "forall n : nat, n + 0 = n",
     "intros n. induction n as [|n IH].\n- reflexivity.\n- simpl. rewrite IH. reflexivity.", "proved"),
    (NAT, "forall n m : nat, n + m = m + n", "intros n m. apply Nat.add_comm.", "proved"),
    (NAT, "forall n m p : nat, n * (m + p) = n * m + n * p", "intros. apply Nat.mul_add_distr_l.", "proved"),
    (NAT, "forall n : nat, 2 * n = n + n", "intros n. lia.", "proved"),
    (NAT, "forall a b : nat, a <= b -> a < S b", "intros a b H. lia.", "proved"),
    (NAT, "forall n : nat, n * 1 = n", "intros n. rewrite Nat.mul_1_r. reflexivity.", "proved"),
    (NAT, "forall n m : nat, n + m = m + n", "intros n m. rewrite Nat.add_comm_r.", "error"),
    (NAT, "forall n : nat, n + 0 = n", "intros n. induction n.", "incomplete"),
    (NAT, "forall n : nat, n + 0 = n", "intros n. admit.", "incomplete"),
    (NAT, "forall n m : nat, n * m = m * n", "intros n m. reflexivity.", "error"),
    (ZED, "forall x : Z, x + 0 = x", "intros x. lia.", "proved"),
    (ZED, "forall x y : Z, x + y = y + x", "intros. apply Z.add_comm.", "proved"),
    (ZED, "forall x y : Z, (x + y) * (x + y) = x * x + 2 * x * y + y * y", "intros. ring.", "proved"),
    (ZED, "forall x : Z, 0 <= x * x", "intros x. nia.", "proved"),
    (ZED, "forall x : Z, x - x = 0", "intros x. ring.", "proved"),
    (ZED, "forall x y : Z, x < y -> x + 1 <= y", "intros x y H. lia.", "proved"),
    (ZED, "forall x : Z, x + 0 = x", "intros x. rewrite Z.add_0_rgt.", "error"),
    (ZED, "forall x y : Z, x * y = y * x", "intros x y. rewrite Z.add_comm. reflexivity.", "error"),
    (ZED, "forall x : Z, x * x >= 0", "intros x. (nia.", "error"),
    (ZED, "forall x : Z, 0 <= x * x", "intros x. split.", "error"),
    (LST, "forall (l : list nat), length (rev l) = length l", "intros l. apply rev_length.", "proved"),
    (LST, "forall (l1 l2 : list nat), length (l1 ++ l2) = length l1 + length l2", "intros. apply app_length.",
     "proved"),
    (LST, "forall (l : list nat), l ++ [] = l", "intros l. apply app_nil_r.", "proved"),
    (LST, "forall (l : list nat), rev (rev l) = l", "intros l. apply rev_involutive.", "proved"),
    (LST, "forall (l : list nat), map (fun x => x) l = l",
     "intros l. induction l as [|a l IH].\n- reflexivity.\n- simpl. rewrite IH. reflexivity.", "proved"),
    (LST, "forall (l : list nat), length (rev l) = length l", "intros l. apply length_rev.", "error"),
    (LST, "forall (l : list nat), l ++ [] = l", "intros l. induction l.\n- reflexivity.", "incomplete"),
    (LST, "forall (l : list nat), rev (rev l) = l", "intros l. reflexivity.", "error"),
    (LST, "forall (a : nat) (l : list nat), length (a :: l) = S (length l)", "intros. simpl. reflexivity.", "proved"),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=10.0, help="timeout_s of both checkers")
    ap.add_argument("--cores", type=int,
                    default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                    help="cores for the process and its children (default: all this process may use)")
    ap.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/coq_check.json)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_before = start_load()
    threads = setup_threads(args.cores)

    from cfjax.domains.math.coq import INSTALL_HINT, CoqChecker, coq_info
    from cfjax.sandbox import describe, probe

    info = coq_info()
    if info is None:
        raise SystemExit(INSTALL_HINT)
    layers = describe(probe())
    print(f"Coq {info['version']} ({info['coqtop']}); sandbox layers:\n{layers}")
    checkers = {"persistent": CoqChecker(persistent=True, timeout_s=args.timeout),
                "fresh": CoqChecker(persistent=False, timeout_s=args.timeout)}
    first: dict[str, list[float]] = {k: [] for k in checkers}
    times: dict[str, list[float]] = {k: [] for k in checkers}
    cpu = {k: [0.0, 0.0] for k in checkers}
    seen: set[tuple[str, str]] = set()
    try:
        for r in range(args.rounds + 1):
            for pre, stmt, proof, want in PROOFS:
                verdicts = {}
                for name, c in checkers.items():
                    cw: dict = {}
                    with cpu_wall(cw):
                        t0 = time.perf_counter()
                        v = c.check(pre, stmt, proof)
                        dt = time.perf_counter() - t0
                    verdicts[name] = v
                    if (name, pre) not in seen:  # the start cost: first check of this preamble
                        seen.add((name, pre))
                        first[name].append(dt)
                    elif r > 0:
                        times[name].append(dt)
                        cpu[name][0] += cw["cpu_s"]
                        cpu[name][1] += cw["wall_s"]
                vp, vf = verdicts["persistent"], verdicts["fresh"]
                key = lambda v: (v.status, v.sentence, v.line, v.failing, v.message)  # noqa: E731
                if key(vp) != key(vf):
                    raise RuntimeError(f"the checkers disagree on {stmt!r} / {proof!r}: {vp} vs {vf}")
                if vp.status != want:
                    raise RuntimeError(f"unexpected verdict for {stmt!r} / {proof!r}: {vp} (expected {want})")
    finally:
        for c in checkers.values():
            c.close()
    stats = {k: quartiles(v) for k, v in times.items()}
    start = {k: statistics.median(v) for k, v in first.items()}
    ratio = stats["fresh"][1] / stats["persistent"][1]
    cpu_over_wall = {k: round(c / w, 2) if w > 0 else None for k, (c, w) in cpu.items()}
    for k in checkers:
        q1, med, q3 = stats[k]
        print(f"{k:>10}: start {start[k] * 1e3:8.1f} ms (median of {len(first[k])} preambles)  steady median "
              f"{med * 1e3:7.1f} ms  IQR {q1 * 1e3:.1f}–{q3 * 1e3:.1f} ms  (n={len(times[k])}, CPU/wall "
              f"{cpu_over_wall[k]})")
    print(f"ratio fresh/persistent (steady-state median per check): {ratio:.1f}x")
    labels = {"persistent": "persistent `coqtop` per preamble (`persistent=True`, the default)",
              "fresh": "fresh `coqc` per check (`persistent=False`)"}
    rows = [[labels[k], fmt_s(start[k]), fmt_s(stats[k][1]), f"{fmt_s(stats[k][0])} – {fmt_s(stats[k][2])}",
             fmt_ratio(stats["fresh"][1] / stats[k][1], bold=k == "persistent"), cpu_over_wall[k]] for k in checkers]
    result = {
        "proofs": len(PROOFS), "rounds": args.rounds, "coq": info["version"], "sandbox_layers": layers,
        "start_median_s": start, "steady_quartiles_s": stats, "ratio_fresh_over_persistent": ratio,
        "cpu_over_wall": cpu_over_wall,
        "tables": [table(
            "check_cost", f"{len(PROOFS)} proofs (15 correct, 15 failing) over 3 preambles, {args.rounds} counted "
            "rounds after one warm-up round, checkers interleaved per proof, every OS layer on both",
            ["Coq checker", "start (first check of a preamble)", "median / check", "IQR / check",
             "fresh time ÷ this (median)", "CPU/wall"], rows,
            note="Both checkers gave identical verdicts on every proof. The persistent checker's CPU/wall "
                 "leaves out its long-lived coqtop (not reaped during the run).")],
    }
    result = {"meta": finish_meta(make_meta("coq_check", SOURCES, args, threads, load_before), t_start), **result}
    print(f"wrote {write_result('coq_check', result, out=args.out)}")
    return result


if __name__ == "__main__":
    main()
