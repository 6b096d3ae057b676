"""Anti-Persistence's runner (``cfjax antipersist run``): :mod:`.runner` runs every row over suites,
split seeds and backbone seeds, aggregates with paired intervals and writes results and plots.

The public names are re-exported by :mod:`cfjax.experiments`.
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".runner": ["APJob", "run_all", "run_job", "aggregate", "format_table", "format_summary", "plot_success",
                "similarity_profile", "format_similarity", "summarize"],
})
del lazy_exports
