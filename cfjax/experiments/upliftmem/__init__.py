"""UpliftMem's runner and studies (``cfjax upliftmem run|probes|controlled|stores``).

- :mod:`.runner`: the end-to-end table (UpliftMem, its ablations and every registered system that fits);
- :mod:`.probes`: probe strategies (EVSI against random and the rest);
- :mod:`.controlled`: the controlled MemSyco-like study of fixed stores;
- :mod:`.stores`: the store-swap study;
- :mod:`.memsyco`: the MemSyco-like fixture (an experiment fixture, not an action domain).

The public names are re-exported by :mod:`cfjax.experiments`.
"""

from cfjax.infra._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".runner": ["UpliftJob", "run_all", "format_table", "quick_config", "summarize_rows", "splits_for"],
    ".probes": ["run_probe_strategies", "format_probes"],
    ".controlled": ["run_controlled", "format_controlled", "controlled_config"],
    ".stores": ["run_store_swap", "format_store_swap", "stores_config"],
})
del lazy_exports
