"""Infrastructure every layer may use: hashing embedder, FAISS index, atomic io, ledger, checkpoints,
progress bars, the world cache and the paired task-bootstrap statistics (:mod:`.stats`). Nothing here
imports a domain, a method, ``cfjax.llm`` or ``cfjax.experiments``.

Import public names from here (``from cfjax.infra import HashingEmbedder, Ledger, CachedWorld``); the
modules stay importable. Names load lazily (PEP 562): ``import cfjax.infra`` imports neither FAISS,
orbax nor JAX.

- :mod:`cfjax.infra.embed` — the character n-gram hashing embedder
- :mod:`cfjax.infra.index` — the FAISS vector index (exact scores with a bias, per-query masks)
- :mod:`cfjax.infra.io` — atomic, checksummed files, JSONL, output directories, the user-facing errors
- :mod:`cfjax.infra.ledger` — backbone and evaluator costs per phase and task
- :mod:`cfjax.infra.cache` — :class:`CachedWorld`, a world behind a verdict cache
- :mod:`cfjax.infra.checkpoint` — orbax checkpoints, committed steps
- :mod:`cfjax.infra.stats` — paired task-bootstrap intervals (clusters = splits)
- :mod:`cfjax.infra.concurrency`, :mod:`cfjax.infra.executors`, :mod:`cfjax.infra.distributed` —
  ordered thread maps, the local / Ray executors, JAX multi-process sharding
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".embed": ["HashingEmbedder"],
    ".index": ["IndexConfig", "VectorIndex"],
    ".io": ["UserError", "InputError", "CorruptFileError", "OutputExistsError", "JSONTooDeepError", "atomic_write_bytes",
            "atomic_write_json", "atomic_write_text", "write_text_if_changed", "canonical_json", "read_json",
            "read_jsonl", "append_jsonl", "iter_lines", "loads_json", "prepare_output_dir", "prepare_output_file",
            "cleanup_stale_temps"],
    ".ledger": ["Costs", "Ledger"],
    ".cache": ["CachedWorld"],
    ".checkpoint": ["save_params", "load_params", "save_step", "load_latest", "committed_steps", "has_checkpoint",
                    "IncompleteCheckpointError"],
    ".stats": ["Interval", "Cluster", "bootstrap", "paired_difference", "fmt_interval", "clusters_from_outcomes"],
    ".concurrency": ["ordered_map", "inflight_of", "DEFAULT_MAX_INFLIGHT"],
    ".executors": ["EXECUTORS", "Executor", "RayExecutor", "ExecutorTaskError", "resolve_executor", "is_local"],
    ".distributed": ["DistributedError", "ProcessSpec", "ProcessInfo", "process_spec", "init_processes",
                     "process_info", "Shard", "process_shard", "gather_items", "allgather_tree"],
})
del lazy_exports
