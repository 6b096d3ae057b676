"""Running rows and reporting them, for every method: runners, metrics, report, figures.

This is analysis code: with the suites it is the only place outside a domain that may read an
:class:`~cfjax.types.AnswerKey` (transfer conditions, harm labels).

Import public names from here (``from cfjax.experiments import run_compare, BackboneSpec``); the
modules stay importable. Names load lazily (PEP 562). Where two runners use the same name in their
own modules, the package names them after the method: ``run_antipersist`` and ``run_upliftmem``
(each module's ``run_all``), ``format_antipersist_table`` and ``format_upliftmem_table`` (each
``format_table``), ``format_antipersist_summary``, ``upliftmem_quick_config``.

- shared helpers: :mod:`.backbones` (backbone specs), :mod:`.common`, :mod:`.rows` (the row registry)
- CounterMem: :mod:`.countermem` (units, jobs, splits), :mod:`.report` (Table 1, §5–6 panels, figures),
  :mod:`.selectors` (decision tables and many selectors)
- Anti-Persistence: :mod:`.antipersist`; UpliftMem: :mod:`.uplift`, :mod:`.uplift_probes`,
  :mod:`.uplift_controlled`, :mod:`.uplift_stores` and the fixture :mod:`cfjax.experiments.memsyco`
- all three: :mod:`.compare`; the sensitivity sweep: :mod:`.sweep`; :mod:`.notebooks`
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".backbones": ["BackboneSpec", "backbone_spec", "backbone_stats", "default_cache_path", "default_workers"],
    ".common": ["spread", "finite", "run_pool", "write_results"],
    ".rows": ["RowSpec", "TABLES", "RETENTION_RULES", "row_specs", "row_names", "rows_in", "register_row",
              "memory_row"],
    ".countermem": ["UnitJob", "run_unit", "run_jobs", "make_jobs", "expand_rows", "quick_splits",
                    "suite_world_kwargs", "resolve_suites", "progress_bars", "RUN_FIGURES"],
    ".report": ["aggregate", "collect_outcomes", "format_report", "draw_figures", "load_results"],
    ".selectors": ["comparison_lines"],
    ".antipersist": ["APJob", "run_all as run_antipersist", "format_table as format_antipersist_table",
                     "format_summary as format_antipersist_summary", "plot_success", "similarity_profile",
                     "format_similarity"],
    ".uplift": ["UpliftJob", "run_all as run_upliftmem", "format_table as format_upliftmem_table",
                "quick_config as upliftmem_quick_config", "summarize_rows"],
    ".uplift_probes": ["run_probe_strategies", "format_probes"],
    ".uplift_controlled": ["run_controlled", "format_controlled", "controlled_config"],
    ".uplift_stores": ["run_store_swap", "format_store_swap", "stores_config"],
    ".compare": ["METHODS", "CompareMethod", "CompareConfig", "run_compare", "format_compare", "MeteredBackbone",
                 "MeteredWorld"],
    ".sweep": ["SweepSpec", "DEFAULT_GRID", "load_grid", "run_sweep", "format_sweep", "draw_sweep"],
    ".notebooks": ["execute_notebook"],
})
del lazy_exports
