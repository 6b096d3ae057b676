"""Keep this checkout's ``kernels/`` folder from shadowing Hugging Face's ``kernels`` package.

``kernels/`` at the top of the repository ships as :mod:`cfjax.kernels` (setup.py); no top-level
``kernels`` is ever installed. But Python puts the working directory first on ``sys.path`` for
``python -m pytest`` and ``python -m cfjax``, and pytest inserts the root directory for the test
packages, so from a checkout's root ``import kernels`` finds the folder. transformers >= 5 depends on
the hub-kernels distribution named ``kernels``: it sees the distribution's metadata, imports
``kernels`` and gets our folder (``ImportError: cannot import name 'CUDAProperties' from
'kernels'``). :class:`HubKernelsFinder` sits first on ``sys.meta_path`` and answers only for the
top-level name ``kernels`` when the ordinary path search would return the checkout's folder: it
searches ``sys.path`` again without that folder's parent, so the installed package is found (or, if
none is installed, the folder is, exactly as before). It imports nothing and costs one path search
the first time ``kernels`` is imported; nothing in cfjax imports the top-level name.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path

_CHECKOUT_KERNELS = (Path(__file__).resolve().parents[2] / "kernels").resolve()


def _same_dir(entry: str, directory: Path) -> bool:
    try:
        return Path(entry or os.getcwd()).resolve() == directory
    except (OSError, RuntimeError):
        return False


class HubKernelsFinder(importlib.abc.MetaPathFinder):
    """Resolve the top-level ``kernels`` past this checkout's folder (module docstring)."""

    def find_spec(self, name, path=None, target=None):  # noqa: D102 - the MetaPathFinder protocol
        if name != "kernels" or path is not None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name)
        origin = getattr(spec, "origin", None) or next(iter(getattr(spec, "submodule_search_locations", None) or []), None)
        if spec is None or origin is None:
            return None
        found = Path(origin).resolve()
        if found != _CHECKOUT_KERNELS and found.parent != _CHECKOUT_KERNELS:
            return None
        parent = _CHECKOUT_KERNELS.parent
        return importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if not _same_dir(p, parent)])


def install() -> None:
    """Put :class:`HubKernelsFinder` first on ``sys.meta_path`` (once), when this is a checkout.

    An installed wheel has no top-level ``kernels`` of ours (its ``site-packages/kernels``, if any, is
    the distribution's), so nothing is installed there."""
    checkout = (_CHECKOUT_KERNELS / "dqn.py").is_file() and (_CHECKOUT_KERNELS.parent / "setup.py").is_file()
    if not checkout or any(isinstance(f, HubKernelsFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, HubKernelsFinder())
