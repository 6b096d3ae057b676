"""CounterMem: memory from executable counterfactual checks (papers/countermem.md; SPEC.md §1).

After a failed action, one-unit alternatives are checked from a copy of the same state with a real
evaluator; verified corrections are stored with evidence and an applicability condition, and a DQN
selector picks one retrieved record or skips memory. Import public names from here
(``from cfjax.countermem import CounterMemory, MemoryStore, build_table``); the modules stay
importable. Names load lazily (PEP 562): ``import cfjax.countermem`` imports no JAX.

- :mod:`cfjax.countermem.api` — :class:`CounterMemory`: learn / recall / revise inside your own agent loop
- :mod:`cfjax.countermem.conditions` — the applicability-condition language (§3.3, App. B.2)
- :mod:`cfjax.countermem.store` — records, admission Eq. 4, retention Eq. 5, reuse Eq. 6, retrieval Eq. 7–8
- :mod:`cfjax.countermem.generator` — Modules I–II: local alternatives, checks, distillation
- :mod:`cfjax.countermem.calls` — its model calls (GENERATE_LOCAL_ALTERNATIVES, DISTIL_RECORD)
- :mod:`cfjax.countermem.agent` — the loop behaviours: retrieve, observe (Eq. 9), select, revise (Module III)
- :mod:`cfjax.countermem.pipeline` — Algorithm 1: construct, train the selector, validate, evaluate
- :mod:`cfjax.countermem.baselines` — Best-of-N and WM-without-CF
- :mod:`cfjax.countermem.table` — counterfactual decision tables
- :mod:`cfjax.countermem.selectors` — many selectors trained at once, against fixed policies
- :mod:`cfjax.countermem.metrics` — row metrics with the paper's denominators (App. D.4–D.6)

Methods know only the shared Protocols: nothing here imports :mod:`cfjax.domains`.
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".api": ["CounterMemory", "Evaluator"],
    ".conditions": ["Condition", "ConditionError", "parse_condition", "And", "Or", "Not", "Compare", "Contains",
                    "Has", "InList", "Universal", "UNIVERSAL", "KEYWORDS", "MAX_DEPTH", "MAX_LENGTH"],
    ".store": ["MemoryStore", "Record", "RecordStats", "Candidate", "Admission", "Retrieved", "FrozenStoreError",
               "InvalidStoreError", "reuse_update"],
    ".generator": ["Alternative", "Expansion", "propose_alternatives", "expand_failure"],
    ".calls": ["GENERATE_LOCAL_ALTERNATIVES", "DISTIL_RECORD", "AlternativesRequest", "AlternativesResult",
               "DistilRequest", "DistilResult", "render_alternatives", "parse_edits", "render_distil",
               "parse_distil"],
    ".agent": ["Agent", "Policy", "Decision", "Episode", "reuse_label", "skip_policy", "top1_policy"],
    ".pipeline": ["construct", "train_selector", "validate", "evaluate", "episode_return", "null_progress"],
    ".baselines": ["JudgeLog", "best_of_n_episode", "wm_without_cf_episode"],
    ".table": ["TableMeta", "TableSettingsError", "build_table", "load_table", "load_tables", "save_table",
               "read_json_file", "table_jobs", "build_part", "file_hash", "infer_observation"],
    ".selectors": ["parse_seeds", "parse_grid", "grid_hparams", "SelectorsResult", "train_selectors",
                   "save_trainer", "load_trainer", "CheckpointMismatchError", "train_resumable", "FIXED_POLICIES",
                   "table_rewards", "rollout", "skip_actions", "top1_actions", "oracle_actions", "greedy_actions",
                   "fixed_policy_outcomes", "compare_with_fixed_policies", "verdict"],
    ".metrics": ["row_metrics"],
})
del lazy_exports
