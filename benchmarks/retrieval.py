"""Retrieval at scale: cfjax's VectorIndex (exact and IVF) against plain FAISS and NumPy.

For 10^4, 10^5 and 10^6 stored 512-d float32 vectors (``--sizes``), one query and batches of
``--batch`` (64) queries, top ``--k`` (10):

* **cfjax exact**: :class:`cfjax.infra.index.VectorIndex` with ``approx_threshold=0`` (always
  exact), bias weight 0.2 and a random bias per entry (the full Eq. 8 score);
* **cfjax approximate**: the same with the IVF index used at every size here (``approx_threshold=1``;
  IVF-PQ, the default ``kind``, and IVF-Flat; ``nlist = round(sqrt(N))``, ``--nprobe``), training
  timed as build time;
* **faiss IndexFlatIP**: plain FAISS over the same unit vectors, no bias, with this wheel's default
  ``distance_compute_blas_threshold`` (128,000: a batch of 64 takes the per-vector SIMD path) and
  with the threshold set to 1 (the BLAS path, the matrix-multiply reference for batches);
* **numpy**: ``keys @ q`` (BLAS sgemv / sgemm) plus ``argpartition`` + a sort of the top ``k``.

Reported: ms per query (best of ``--repeats`` warm calls; a batch's time divided by its size),
the bytes of keys read per second for one query (``N * 512 * 4`` bytes / time) as a share of this
machine's streaming bandwidth, measured in the same run (the best of a BLAS ``sgemv`` and a NumPy
copy, counted as read + write, over a 1 GiB array), build/train time, and recall@k of the
approximate index against the exact one, without and with filters (8 different random masks
keeping ~50% of the entries, each shared by 8 queries of the batch; the exact index answers the
same filtered queries). Table ``ivf_choice`` puts IVF-PQ (``--pq-m`` sub-quantisers of 8 bits,
exact re-ranking of its top 10·k) and IVF-Flat side by side at the largest size: the evidence behind
IVF-PQ as the default ``kind``.

Data: ``N / 100`` (at least 16) cluster centres drawn uniformly on the unit sphere; each vector is
a centre plus isotropic Gaussian noise of expected norm ``--spread`` (0.5), renormalised; queries
are drawn the same way (fresh noise), so IVF lists are meaningful and the nearest neighbours are
not trivially the centre. Seeded (``--seed``).

Threads: ``--threads`` (default 2, the machine) bounds the process to that many cores and sizes
every pool (BLAS, OpenMP/FAISS) before NumPy/FAISS are imported; each measured block records its
CPU time / wall time (≈ ``threads`` when the pools used them). The machine load before and after
is recorded (the machine may be shared). 10^6 x 512 float32 is 2 GB; the run holds about 6 GB at
that size (the exact keys, the IVF's copy, one more for the FAISS baselines, freed in between).

Usage:
    python benchmarks/retrieval.py [--quick] [--sizes 10000,100000,1000000] [--threads 2]
        [--batch 64] [--k 10] [--nprobe 32] [--repeats 5] [--out benchmarks/results/retrieval.json]

``--quick``: 10^4 and 10^5 only, fewer repeats (a smoke run; results are written to the same
file unless ``--out`` says otherwise).
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bench import finish_meta, make_meta, pin_peers, setup_threads, start_load  # noqa: E402
from benchmarks._meta import cpu_wall, table, write_result  # noqa: E402

SOURCES = ["cfjax/infra/index.py", "benchmarks/_bench.py", "benchmarks/_meta.py"]
DIM = 512
BIAS_WEIGHT = 0.2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000", help="stored vectors, comma-separated")
    p.add_argument("--quick", action="store_true", help="10^4 and 10^5 only, 3 repeats")
    p.add_argument("--threads", type=int, default=2, help="cores for every side (default 2, the machine)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--nprobe", type=int, default=32)
    p.add_argument("--pq-m", type=int, default=64, help="IVF-PQ sub-quantisers (comparison at the largest size)")
    p.add_argument("--spread", type=float, default=0.5, help="noise norm around the cluster centres")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()]
    if args.quick:
        sizes = [s for s in sizes if s <= 100_000] or [10_000, 100_000]
        args.repeats = min(args.repeats, 3)
    if not sizes or min(sizes) < 1_000:
        p.error(f"--sizes must be ≥ 1000 each, got {args.sizes!r}")
    if args.batch < 2 or args.k < 1 or args.nprobe < 1 or args.repeats < 1:
        p.error("--batch ≥ 2, --k ≥ 1, --nprobe ≥ 1 and --repeats ≥ 1 are required")
    args.size_list = sizes
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t_start = time.perf_counter()
    load_before = start_load()
    threads = setup_threads(args.threads)

    import faiss
    import numpy as np

    from cfjax.infra.index import IndexConfig, VectorIndex

    pin_peers(args.threads, threads)
    rng = np.random.default_rng(args.seed)

    def best_ms(fn: Callable[[], Any], repeats: int, budget_s: float = 20.0) -> tuple[float, dict]:
        """Best wall time (ms) of ``repeats`` warm calls (after one warm-up; fewer when one call
        exceeds the time budget) and the CPU/wall record of the timed calls."""
        fn()
        times: list[float] = []
        rec: dict = {}
        with cpu_wall(rec):
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
                if sum(times) > budget_s and len(times) >= 2:
                    break
        return min(times) * 1e3, rec

    def clustered(n: int, centres: np.ndarray) -> np.ndarray:
        """Unit vectors: a random centre plus isotropic noise of norm ~spread, renormalised (chunked)."""
        out = np.empty((n, DIM), dtype=np.float32)
        for lo in range(0, n, 65_536):
            hi = min(n, lo + 65_536)
            x = centres[rng.integers(0, centres.shape[0], size=hi - lo)]
            x = x + rng.standard_normal((hi - lo, DIM), dtype=np.float32) * np.float32(args.spread / math.sqrt(DIM))
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            out[lo:hi] = x
        return out

    # ---- this machine's streaming bandwidth, in this run --------------------------------------
    arr = np.ones(((1 << 30) // (4 * DIM), DIM), dtype=np.float32)  # 1 GiB
    vec = np.ones(DIM, dtype=np.float32)
    gemv_ms, gemv_rec = best_ms(lambda: arr @ vec, args.repeats)
    dst = np.empty_like(arr[: arr.shape[0] // 2])
    src = arr[arr.shape[0] // 2 :]
    copy_ms, _ = best_ms(lambda: np.copyto(dst, src), args.repeats)
    gemv_gbs = arr.nbytes / gemv_ms / 1e6
    copy_gbs = 2 * src.nbytes / copy_ms / 1e6
    stream_gbs = max(gemv_gbs, copy_gbs)
    del arr, dst, src
    gc.collect()

    latency_rows: list[list[Any]] = []
    recall_rows: list[list[Any]] = []
    pq_rows: list[list[Any]] = []
    raw: dict[str, Any] = {"stream": {"sgemv_GBps": round(gemv_gbs, 2), "copy_GBps": round(copy_gbs, 2),
                                      "sgemv_cpu_over_wall": gemv_rec.get("cpu_over_wall")}, "sizes": {}}
    k, nb = args.k, args.batch

    def recall(approx: np.ndarray, exact: np.ndarray) -> float:
        hit = sum(len(set(a[a >= 0].tolist()) & set(e[e >= 0].tolist())) for a, e in zip(approx, exact))
        return hit / max(1, int(np.count_nonzero(exact >= 0)))

    def np_topk(keys: np.ndarray, q: np.ndarray) -> np.ndarray:
        s = keys @ q.T  # [N, Q]
        part = np.argpartition(-s, k - 1, axis=0)[:k]
        order = np.argsort(-np.take_along_axis(s, part, axis=0), axis=0)
        return np.take_along_axis(part, order, axis=0).T

    for n in args.size_list:
        print(f"[retrieval] N = {n:,}", flush=True)
        centres = rng.standard_normal((max(16, n // 100), DIM)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        data = clustered(n, centres)
        queries = clustered(nb, centres)
        q1 = queries[:1]
        biases = rng.uniform(-1.0, 1.0, size=n)
        filt = np.repeat(rng.random((8, n)) < 0.5, nb // 8 + 1, axis=0)[:nb]  # 8 filters x 8 queries
        info: dict[str, Any] = {}
        key_bytes = n * DIM * 4

        # -- cfjax exact
        exact = VectorIndex(DIM, bias_weight=BIAS_WEIGHT, config=IndexConfig(approx_threshold=0))
        t0 = time.perf_counter()
        exact.add(data, biases)
        build_exact = time.perf_counter() - t0
        del data
        gc.collect()
        keys = exact.unit_keys
        e1, e1_rec = best_ms(lambda: exact.search(q1, k), args.repeats)
        eb, eb_rec = best_ms(lambda: exact.search(queries, k), args.repeats)
        ebf, _ = best_ms(lambda: exact.search(queries, k, filt), max(1, args.repeats // 2))
        exact_ids = exact.search(queries, k)[1]
        exact_ids_f = exact.search(queries, k, filt)[1]
        info["cfjax_exact"] = {"one_ms": e1, "batch_ms_per_q": eb / nb, "batch_filtered_ms_per_q": ebf / nb,
                               "one_cpu_over_wall": e1_rec.get("cpu_over_wall"),
                               "batch_cpu_over_wall": eb_rec.get("cpu_over_wall"), "build_s": build_exact}

        # -- numpy matmul + argpartition over the same unit keys (no bias, no mask)
        n1, _ = best_ms(lambda: np_topk(keys, q1), args.repeats)
        nbm, nb_rec = best_ms(lambda: np_topk(keys, queries), args.repeats)
        info["numpy"] = {"one_ms": n1, "batch_ms_per_q": nbm / nb, "batch_cpu_over_wall": nb_rec.get("cpu_over_wall")}

        # -- plain faiss IndexFlatIP (default threshold, then BLAS for the batch)
        t0 = time.perf_counter()
        flat = faiss.IndexFlatIP(DIM)
        flat.add(keys)
        build_flat = time.perf_counter() - t0
        default_thr = faiss.cvar.distance_compute_blas_threshold
        f1, f1_rec = best_ms(lambda: flat.search(q1, k), args.repeats)
        fb, _ = best_ms(lambda: flat.search(queries, k), max(1, args.repeats // 2))
        faiss.cvar.distance_compute_blas_threshold = 1
        try:
            fbb, fbb_rec = best_ms(lambda: flat.search(queries, k), args.repeats)
            f1b, _ = best_ms(lambda: flat.search(q1, k), args.repeats)
        finally:
            faiss.cvar.distance_compute_blas_threshold = default_thr
        info["faiss_flat"] = {"one_ms": f1, "batch_ms_per_q": fb / nb, "blas_batch_ms_per_q": fbb / nb,
                              "blas_one_ms": f1b, "blas_batch_cpu_over_wall": fbb_rec.get("cpu_over_wall"),
                              "default_blas_threshold": default_thr, "build_s": build_flat}
        del flat
        gc.collect()

        # -- cfjax approximate (the default IVF kind, IVF-PQ, at every size here)
        approx = VectorIndex(DIM, bias_weight=BIAS_WEIGHT,
                             config=IndexConfig(approx_threshold=1, pq_m=args.pq_m, nprobe=args.nprobe,
                                                seed=args.seed))
        t0 = time.perf_counter()
        approx.add(keys, biases)  # trains on the first add (N >= threshold): build time includes training
        build_approx = time.perf_counter() - t0
        assert approx.approximate
        a1, a1_rec = best_ms(lambda: approx.search(q1, k), args.repeats)
        ab, _ = best_ms(lambda: approx.search(queries, k), args.repeats)
        abf, _ = best_ms(lambda: approx.search(queries, k, filt), args.repeats)
        r = recall(approx.search(queries, k)[1], exact_ids)
        rf = recall(approx.search(queries, k, filt)[1], exact_ids_f)
        info["cfjax_approx"] = {"one_ms": a1, "batch_ms_per_q": ab / nb, "batch_filtered_ms_per_q": abf / nb,
                                "recall": r, "recall_filtered": rf, "nlist": approx.nlist, "build_s": build_approx,
                                "one_cpu_over_wall": a1_rec.get("cpu_over_wall")}

        def gbs(ms: float) -> float:
            return key_bytes / ms / 1e6

        for name, one, batch, build in [
            ("cfjax exact (Eq. 8: + bias)", e1, eb / nb, build_exact),
            ("cfjax approximate (IVF-PQ + exact re-rank)", a1, ab / nb, build_approx),
            ("faiss IndexFlatIP", f1, fb / nb, build_flat),
            ("faiss IndexFlatIP, BLAS (threshold 1)", f1b, fbb / nb, build_flat),
            ("numpy matmul + argpartition", n1, nbm / nb, 0.0),
        ]:
            exact_scan = not name.startswith("cfjax approximate")
            latency_rows.append([f"{n:,}", name, round(one, 2), round(batch, 3),
                                 round(gbs(one), 1) if exact_scan else "–",
                                 f"{100 * gbs(one) / stream_gbs:.0f}%" if exact_scan else "–",
                                 f"{build:.2f}" if build else "–"])
        approx_nlist = approx.nlist
        recall_rows.append([f"{n:,}", approx_nlist, args.nprobe, f"{r:.3f}", f"{rf:.3f}", round(a1, 2),
                            round(ab / nb, 3), round(abf / nb, 3), f"{e1 / a1:.1f}×", f"{eb / ab:.1f}×",
                            f"{ebf / abf:.1f}×", f"{build_approx:.1f}"])

        # -- cfjax IVF-Flat at the largest size: the comparison behind IVF-PQ as the default
        if n == max(args.size_list):
            width = approx.config.ivf_dim(DIM)
            del approx
            gc.collect()
            ivf_flat = VectorIndex(DIM, bias_weight=BIAS_WEIGHT,
                                   config=IndexConfig(approx_threshold=1, kind="flat", nprobe=args.nprobe,
                                                      seed=args.seed))
            t0 = time.perf_counter()
            ivf_flat.add(keys, biases)
            build_fl = time.perf_counter() - t0
            l1, _ = best_ms(lambda: ivf_flat.search(q1, k), args.repeats)
            lbm, _ = best_ms(lambda: ivf_flat.search(queries, k), args.repeats)
            lbf, _ = best_ms(lambda: ivf_flat.search(queries, k, filt), args.repeats)
            r_fl = recall(ivf_flat.search(queries, k)[1], exact_ids)
            r_flf = recall(ivf_flat.search(queries, k, filt)[1], exact_ids_f)
            pq_rows += [
                [f"{n:,}", f"IVF-PQ m={args.pq_m} x 8 bit ({width}-d padded), exact re-rank of top {10 * k}",
                 f"{r:.3f}", f"{rf:.3f}", round(a1, 2), round(ab / nb, 3), round(abf / nb, 3),
                 f"{n * (args.pq_m + 8) / 1e9:.2f} GB", f"{build_approx:.1f}"],
                [f"{n:,}", f"IVF-Flat, exact re-rank of top {k + 8}", f"{r_fl:.3f}", f"{r_flf:.3f}", round(l1, 2),
                 round(lbm / nb, 3), round(lbf / nb, 3), f"{n * (DIM + 1) * 4 / 1e9:.2f} GB", f"{build_fl:.1f}"],
            ]
            info["cfjax_ivfflat"] = {"recall": r_fl, "recall_filtered": r_flf, "one_ms": l1,
                                     "batch_ms_per_q": lbm / nb, "batch_filtered_ms_per_q": lbf / nb,
                                     "build_s": build_fl}
            del ivf_flat
        else:
            del approx
        raw["sizes"][str(n)] = info
        del exact, keys
        gc.collect()

    threads_summary = threads.get("summary", "")
    tables = [
        table("latency", f"Exact and approximate top-{k} search over 512-d float32 keys, {args.threads} threads",
              ["N", "method", "1 query, ms", f"batch of {nb}, ms/query", "1 query: keys GB/s",
               "of streaming", "build s"], latency_rows,
              note=(f"Streaming bandwidth measured in the same run: {stream_gbs:.1f} GB/s (best of sgemv "
                    f"{gemv_gbs:.1f} GB/s and copy {copy_gbs:.1f} GB/s over 1 GiB). Best of {args.repeats} warm "
                    f"calls. Keys of ≤ 10^5 vectors (≤ 205 MB) partly fit in cache at 10^4 (20 MB), so more than "
                    f"100% is possible there. cfjax scores Eq. 8 (cosine + 0.2 · bias); FAISS and NumPy cosine "
                    f"only. {threads_summary}.")),
        table("recall", f"cfjax approximate (IVF-PQ + exact re-rank) against cfjax exact: recall@{k} and speed",
              ["N", "nlist", "nprobe", f"recall@{k}", f"recall@{k}, filtered", "1 query, ms",
               f"batch ms/query", "filtered batch ms/query", "speed-up, 1 query", "speed-up, batch",
               "speed-up, filtered batch", "build + train s"], recall_rows,
              note=("Filtered: 8 random masks keeping ~50% of the entries, each shared by 8 of the 64 queries "
                    "(one FAISS call and one IDSelectorBitmap per mask; nprobe scaled by 1/share). Clustered "
                    "synthetic data (module docstring).")),
    ]
    if pq_rows:
        tables.append(table("ivf_choice", f"IVF-PQ or IVF-Flat inside cfjax at {max(args.size_list):,} x 512, "
                                          f"nprobe {args.nprobe}",
                            ["N", "IVF lists", f"recall@{k}", f"recall@{k}, filtered", "1 query, ms",
                             "batch ms/query", "filtered batch ms/query", "IVF memory (beyond the keys)",
                             "build + train s"], pq_rows,
                            note="Both score Eq. 8 through bias-folded vectors and return exactly rescored "
                                 "candidates; recall against cfjax exact with the same filters."))
    args_json = {kk: v for kk, v in vars(args).items() if kk != "size_list"}
    args_json["sizes"] = ",".join(map(str, args.size_list))
    ns = argparse.Namespace(**args_json)
    meta = make_meta("retrieval", SOURCES, ns, threads, load_before)
    meta["stream_GBps"] = round(stream_gbs, 2)
    payload = {"meta": finish_meta(meta, t_start), "tables": tables, "raw": raw}
    path = write_result("retrieval", payload, out=args.out)
    for t in tables:
        print(f"\n{t['title']}\n" + " | ".join(t["columns"]))
        for row in t["rows"]:
            print(" | ".join(row))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
