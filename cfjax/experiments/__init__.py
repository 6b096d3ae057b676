"""Running rows and reporting them, for every method: runners, metrics, report, figures.

This is analysis code: with the suites it is the only place outside a domain that may read an
:class:`~cfjax.types.AnswerKey` (transfer conditions, harm labels).

Import public names from here (``from cfjax.experiments import run_compare, BackboneSpec``); the
modules stay importable. Names load lazily (PEP 562). Where two runners use the same name in their
own modules, the package names them after the method: ``run_antipersist`` and ``run_upliftmem``
(each module's ``run_all``), ``format_antipersist_table`` and ``format_upliftmem_table`` (each
``format_table``), ``format_antipersist_summary``, ``upliftmem_quick_config``.

Layout: shared public helpers at the top, one package per method (its runner, rows, report and
figures), and the cross-method studies. No module imports another's private names, and there is no
import cycle (``tests/test_contracts.py``).

- shared: :mod:`.backbones` (backbone specs), :mod:`.common` (splits, output, the process pool),
  :mod:`.worlds` (suites and memoised worlds per process), :mod:`.transport`, :mod:`.stats`,
  :mod:`.metrics`, :mod:`.notebooks`
- CounterMem (:mod:`.countermem`): :mod:`.countermem.runner` (units, jobs), :mod:`.countermem.rows`
  (the row registry), :mod:`.countermem.report` (Table 1, §5–6 panels, figures),
  :mod:`.countermem.selectors` (decision tables and many selectors), :mod:`.countermem.table_jobs`
- Anti-Persistence (:mod:`.antipersist`): :mod:`.antipersist.runner`
- UpliftMem (:mod:`.upliftmem`): :mod:`.upliftmem.runner` (the end-to-end table), :mod:`.upliftmem.probes`,
  :mod:`.upliftmem.controlled`, :mod:`.upliftmem.stores` and the fixture :mod:`.upliftmem.memsyco`
- all three: :mod:`.compare`; the sensitivity sweep: :mod:`.sweep`
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".backbones": ["BackboneSpec", "backbone_spec", "backbone_stats", "default_cache_path", "default_workers"],
    ".common": ["spread", "finite", "quick_splits", "resolve_suites", "clear_dir", "run_pool", "write_results"],
    ".worlds": ["SharedWorld", "open_world", "close_worlds"],
    ".countermem.rows": ["RowSpec", "TABLES", "RETENTION_RULES", "row_specs", "row_names", "rows_in", "register_row",
              "memory_row"],
    ".countermem.runner": ["UnitJob", "run_unit", "run_jobs", "make_jobs", "expand_rows",
                    "suite_world_kwargs", "progress_bars", "RUN_FIGURES"],
    ".countermem.report": ["aggregate", "collect_outcomes", "format_report", "draw_figures", "load_results"],
    ".countermem.selectors": ["comparison_lines"],
    ".antipersist.runner": ["APJob", "run_all as run_antipersist", "format_table as format_antipersist_table",
                     "format_summary as format_antipersist_summary", "plot_success", "similarity_profile",
                     "format_similarity"],
    ".upliftmem.runner": ["UpliftJob", "run_all as run_upliftmem", "format_table as format_upliftmem_table",
                "quick_config as upliftmem_quick_config", "summarize_rows"],
    ".upliftmem.probes": ["run_probe_strategies", "format_probes"],
    ".upliftmem.controlled": ["run_controlled", "format_controlled", "controlled_config"],
    ".upliftmem.stores": ["run_store_swap", "format_store_swap", "stores_config"],
    ".compare": ["METHODS", "CompareMethod", "CompareConfig", "run_compare", "format_compare", "MeteredBackbone",
                 "MeteredWorld"],
    ".sweep": ["SweepSpec", "DEFAULT_GRID", "load_grid", "run_sweep", "format_sweep", "draw_sweep"],
    ".notebooks": ["execute_notebook"],
})
del lazy_exports
