"""The peer memory systems the three papers compare against, one folder each (../shared/PEERS.md).

Each ``cfjax/peers/<name>/`` is a plugin: its call kinds (prompt, parser, scripted competence handler,
registered in :data:`cfjax.registry.CALLS`), its store (a :class:`cfjax.memory.MemorySystem`) and one
``MEMORY_SYSTEMS.register`` in its ``__init__``. This package imports every sub-package it holds, so a
new peer is one new folder: nothing else in the tree names it. Peers share only
:mod:`cfjax.peers.common` (embedding top-k, store files, memory-set rendering); a peer never imports
another peer (tests/test_contracts.py).
"""

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["PEERS"]

#: the peer folders found here, in name order (each registered itself when imported)
PEERS: tuple[str, ...] = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__)
                                      if m.ispkg and not m.name.startswith("_")))

for _name in PEERS:
    importlib.import_module(f"{__name__}.{_name}")
