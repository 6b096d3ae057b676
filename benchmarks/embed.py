"""Throughput of cfjax.infra.embed.HashingEmbedder vs scikit-learn's HashingVectorizer.

Both embed the same ~20k short, SQL-question-like texts (generated with a
seeded RNG) with identical settings: ``analyzer='char_wb'``,
``ngram_range=(3, 5)``, 512 features, signed hashing, L2 norm, lower-casing.
Each is warmed up once, then timed best-of-``--repeats`` on the full batch.
scikit-learn returns a sparse CSR matrix (no densification is timed, which
favours it); cfjax returns a dense ``float32[B, 512]`` array.

Thread counts are pinned to 1 (OMP/OPENBLAS/MKL/NUMEXPR env vars, set below
before NumPy is imported) so the figures are single-core and reproducible.

Usage:
    python benchmarks/embed.py [--n-texts 20000] [--repeats 7] [--out benchmarks/results/embed.json]
"""

from __future__ import annotations

import os

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
for _var in _THREAD_VARS:
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from cfjax.infra.embed import HashingEmbedder  # noqa: E402

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


def best_of(fn: Callable[[Sequence[str]], object], texts: Sequence[str], repeats: int) -> float:
    """Best wall-clock seconds of ``fn(texts)`` over ``repeats`` runs, after one warm-up."""
    fn(texts)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(texts)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    """Runs the benchmark, prints a summary and writes the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "embed.json")
    args = parser.parse_args()

    import sklearn
    from sklearn.feature_extraction.text import HashingVectorizer

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

    print(f"threads: {', '.join(f'{v}=1' for v in _THREAD_VARS)} (set before importing numpy)")
    mean_chars = float(np.mean([len(t) for t in texts]))
    print(f"texts: {len(texts)} (mean {mean_chars:.1f} chars), best of {args.repeats} after 1 warm-up")
    t_ours = best_of(ours.embed, texts, args.repeats)
    t_theirs = best_of(theirs.transform, texts, args.repeats)
    ours_tps, theirs_tps = len(texts) / t_ours, len(texts) / t_theirs
    ratio = ours_tps / theirs_tps
    print(f"cfjax HashingEmbedder     : {ours_tps:10,.0f} texts/s ({t_ours * 1e3:7.1f} ms, dense f32)")
    print(f"sklearn HashingVectorizer : {theirs_tps:10,.0f} texts/s ({t_theirs * 1e3:7.1f} ms, sparse CSR)")
    print(f"ratio cfjax / sklearn     : {ratio:10.2f}x")

    result = {
        "benchmark": "embed_throughput",
        "n_texts": len(texts),
        "mean_chars": mean_chars,
        "seed": args.seed,
        "repeats": args.repeats,
        "settings": {
            "analyzer": "char_wb",
            "ngram_range": [3, 5],
            "dim": 512,
            "signed": True,
            "norm": "l2",
        },
        "cfjax": {"seconds": t_ours, "texts_per_s": ours_tps, "output": "dense float32"},
        "sklearn": {"seconds": t_theirs, "texts_per_s": theirs_tps, "output": "sparse csr float32"},
        "ratio_cfjax_over_sklearn": ratio,
        "threads": {v: os.environ[v] for v in _THREAD_VARS},
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "sklearn": sklearn.__version__,
        },
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
