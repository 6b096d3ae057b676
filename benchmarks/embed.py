"""Throughput of cfjax.infra.embed.HashingEmbedder vs scikit-learn's HashingVectorizer.

Both embed the same ~20k short, SQL-question-like texts (generated with a
seeded RNG) with identical settings: ``analyzer='char_wb'``,
``ngram_range=(3, 5)``, 512 features, signed hashing, L2 norm, lower-casing.
Each is warmed up once, then timed best-of-``--repeats`` on the full batch.
scikit-learn returns a sparse CSR matrix (no densification is timed, which
favours it); cfjax returns a dense ``float32[B, 512]`` array.

Both sides get the same cores (``--cores``, default 1): the process is bound to them and every
thread pool (BLAS/OpenMP env vars before NumPy is imported, then ``threadpoolctl`` for the pools
scikit-learn uses) is sized to them; each side's CPU time / wall time is recorded (≈ 1.0 with one
core). Results go to ``benchmarks/results/embed.json`` (``meta`` + ``tables``, see ``_meta.py``);
``python benchmarks/render.py`` puts its tables into RESULTS.md.

Usage:
    python benchmarks/embed.py [--n-texts 20000] [--repeats 7] [--cores 1] [--out benchmarks/results/embed.json]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import finish_meta, fmt_ratio, make_meta, pin_peers, setup_threads, start_load  # noqa: E402
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

_TABLES = {
    "singer": ["name", "country", "age", "song_name", "song_release_year", "is_male"],
    "stadium": ["name", "location", "capacity", "highest", "lowest", "average"],
    "concert": ["concert_name", "theme", "year", "stadium_id"],
    "employee": ["name", "age", "city", "salary", "department"],
    "flight": ["flight_no", "origin", "destination", "distance", "price", "departure_date"],
    "student": ["first_name", "last_name", "major", "gpa", "advisor", "city_code"],
    "course": ["title", "credits", "department", "instructor"],
    "order": ["order_id", "customer_id", "order_date", "total_amount", "status"],
}
_VALUES = ["France", "Paris", "2014", "30", "Computer Science", "LA", "100000", "pending", "Aberdeen", "5"]
_TEMPLATES = [
    "How many {t}s are there?",
    "How many {t}s have {c} greater than {v}?",
    "What is the average {c} of all {t}s?",
    "List the {c} of each {t} ordered by {c2} in descending order.",
    "Show the {c} and {c2} of {t}s whose {c3} is {v}.",
    "What are the names of {t}s that have more than {v} {t2}s?",
    "Find the {t} with the highest {c}.",
    "Which {c} has the most {t}s? Return the {c} and the count.",
    "Return the distinct {c} values of {t}s in {v}.",
    "What is the maximum and minimum {c} for {t}s with {c2} equal to {v}?",
    "For each {c}, how many {t}s are there and what is their total {c2}?",
    "Show all {t} {c}s that do not appear in any {t2}.",
]


def make_texts(n: int, seed: int = 0) -> list[str]:
    """Generates ``n`` short SQL-question-like texts (deterministic in ``seed``).

    Args:
        n: Number of texts.
        seed: RNG seed.

    Returns:
        The texts.
    """
    rng = random.Random(seed)
    tables = list(_TABLES)
    texts = []
    for _ in range(n):
        t, t2 = rng.sample(tables, 2)
        c, c2, c3 = rng.sample(_TABLES[t], 3)
        texts.append(
            rng.choice(_TEMPLATES).format(t=t, t2=t2, c=c, c2=c2, c3=c3, v=rng.choice(_VALUES))
        )
    return texts


def best_of(fn: Callable[[Sequence[str]], object], texts: Sequence[str], repeats: int, record: dict) -> float:
    """Best wall-clock seconds of ``fn(texts)`` over ``repeats`` runs, after one warm-up; the CPU time /
    wall time of the timed runs goes into ``record``."""
    fn(texts)
    best = float("inf")
    with cpu_wall(record):
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(texts)
            best = min(best, time.perf_counter() - t0)
    return best


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cores", type=int, default=1, help="cores (and threads) for both sides")
    parser.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/embed.json)")
    return parser.parse_args(argv)


SOURCES = ["benchmarks/_bench.py", "cfjax/infra/embed.py"]


def main(argv: list[str] | None = None) -> dict:
    """Runs the benchmark, prints a summary and writes the JSON result."""
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_before = start_load()
    threads = setup_threads(args.cores)

    import numpy as np
    import sklearn
    from sklearn.feature_extraction.text import HashingVectorizer

    from cfjax.infra.embed import HashingEmbedder

    pin_peers(args.cores, threads)
    texts = make_texts(args.n_texts, args.seed)
    ours = HashingEmbedder(dim=512, ngram_range=(3, 5), lowercase=True, seed=0)
    theirs = HashingVectorizer(
        analyzer="char_wb",
        ngram_range=(3, 5),
        n_features=512,
        alternate_sign=True,
        norm="l2",
        lowercase=True,
        dtype=np.float32,
    )

    print(f"threads: {threads}")
    mean_chars = float(np.mean([len(t) for t in texts]))
    print(f"texts: {len(texts)} (mean {mean_chars:.1f} chars), best of {args.repeats} after 1 warm-up")
    cw_ours: dict = {}
    cw_theirs: dict = {}
    t_ours = best_of(ours.embed, texts, args.repeats, cw_ours)
    t_theirs = best_of(theirs.transform, texts, args.repeats, cw_theirs)
    ours_tps, theirs_tps = len(texts) / t_ours, len(texts) / t_theirs
    ratio = ours_tps / theirs_tps
    cpu_ratio = cw_theirs["cpu_s"] / cw_ours["cpu_s"] if cw_ours["cpu_s"] > 0 else None  # same repeats on both sides
    print(f"cfjax HashingEmbedder     : {ours_tps:10,.0f} texts/s ({t_ours * 1e3:7.1f} ms, dense f32, "
          f"CPU/wall {cw_ours['cpu_over_wall']})")
    print(f"sklearn HashingVectorizer : {theirs_tps:10,.0f} texts/s ({t_theirs * 1e3:7.1f} ms, sparse CSR, "
          f"CPU/wall {cw_theirs['cpu_over_wall']})")
    print(f"ratio cfjax / sklearn     : {ratio:10.2f}x")

    meta = make_meta("embed", SOURCES, args, threads, load_before)
    meta["versions"]["sklearn"] = sklearn.__version__
    rows = [
        ["cfjax `HashingEmbedder` (NumPy, vectorised over the batch; dense float32 out)", f"{ours_tps:,.0f}",
         f"{t_ours * 1e3:.1f} ms", cw_ours["cpu_over_wall"], fmt_ratio(ratio, bold=True), fmt_ratio(cpu_ratio)],
        ["scikit-learn `HashingVectorizer` (sparse CSR out)", f"{theirs_tps:,.0f}", f"{t_theirs * 1e3:.1f} ms",
         cw_theirs["cpu_over_wall"], "1.0×", "1.0×"],
    ]
    result = {
        "meta": finish_meta(meta, t_start),
        "tables": [table(
            "throughput", f"{len(texts):,} texts (mean {mean_chars:.0f} characters), 512-d char_wb 3–5-grams, "
            f"signed hashing, L2 norm; one warm-up, best of {args.repeats}",
            ["embedder", "texts/s", "time for all texts", "CPU/wall", "ratio", "ratio by CPU time"], rows)],
        "n_texts": len(texts),
        "mean_chars": mean_chars,
        "settings": {"analyzer": "char_wb", "ngram_range": [3, 5], "dim": 512, "signed": True, "norm": "l2"},
        "cfjax": {"seconds": t_ours, "texts_per_s": ours_tps, "output": "dense float32", "cpu_wall": cw_ours},
        "sklearn": {"seconds": t_theirs, "texts_per_s": theirs_tps, "output": "sparse csr float32",
                    "cpu_wall": cw_theirs},
        "ratio_cfjax_over_sklearn": ratio,
        "cpu_time_ratio_cfjax_over_sklearn": cpu_ratio,
    }
    path = write_result("embed", result, out=args.out)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
