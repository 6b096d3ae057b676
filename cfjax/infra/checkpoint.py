"""Orbax checkpoints of selector parameters, with a JSON sidecar of metadata.

A checkpoint directory holds ``params/`` (orbax ``StandardCheckpointer``,
which writes to a temporary directory and renames on completion, so a crash
never leaves a half-written ``params/``) and ``meta.json`` (atomic,
checksummed): config, seed, which validation checkpoint was kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from cfjax.infra.io import atomic_write_json, read_json

__all__ = ["save_params", "load_params"]


def save_params(directory: str | Path, params: Any, meta: dict) -> Path:
    """Save a parameter pytree and its metadata under ``directory`` (replaced if present)."""
    directory = Path(directory).absolute()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "params"
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(target, jax.tree.map(np.asarray, params), force=True)
    ckpt.wait_until_finished()
    ckpt.close()
    atomic_write_json(directory / "meta.json", meta)
    return directory


def load_params(directory: str | Path, like: Any | None = None) -> tuple[Any, dict]:
    """Load ``(params, meta)``; ``like`` (a pytree of the same structure) restores exact dtypes/shapes."""
    directory = Path(directory).absolute()
    ckpt = ocp.StandardCheckpointer()
    try:
        if like is not None:
            params = ckpt.restore(directory / "params", jax.tree.map(np.asarray, like))
        else:
            params = ckpt.restore(directory / "params")
    finally:
        ckpt.close()
    return params, read_json(directory / "meta.json")
