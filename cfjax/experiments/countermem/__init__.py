"""CounterMem's runner, rows and report (``cfjax countermem run|report|table|train-selectors``).

- :mod:`.runner`: units (suite × split × seed), jobs, the row context the rows run in;
- :mod:`.rows`: the row registry (:class:`~.rows.RowSpec`: table, pairing, memory use);
- :mod:`.report`: Table 1 per base agent, the §5–6 panels with paired intervals, the figures;
- :mod:`.selectors`: decision tables and many selectors trained on one;
- :mod:`.table_jobs`: a decision table's parts as Ray jobs.

The public names are re-exported by :mod:`cfjax.experiments`.
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".runner": ["UnitJob", "run_unit", "run_jobs", "make_jobs", "expand_rows", "suite_world_kwargs",
                "progress_bars", "RUN_FIGURES", "run_main"],
    ".rows": ["RowSpec", "TABLES", "RETENTION_RULES", "row_specs", "row_names", "rows_in", "register_row", "memory_row"],
    ".report": ["aggregate", "collect_outcomes", "format_report", "draw_figures", "load_results", "outcome_clusters",
                "interval"],
    ".selectors": ["comparison_lines"],
})
del lazy_exports
