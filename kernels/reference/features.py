"""NumPy reference of :mod:`cfjax.kernels.features` (identical semantics; Eq. 9)."""

from __future__ import annotations

import numpy as np

from cfjax.kernels.features import (ADM, BUDGET_OFFSET, FREQ, GAIN, HELP, N_SLOTS, OBS_DIM, PROJ_DIM, REL, REUSE,
                                    SLOT_DIM, SLOT_OFFSET, VALID)

__all__ = ["action_mask_reference", "normalize_slots_reference", "observation_reference"]


def normalize_slots_reference(slots_raw: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """NumPy reference of :func:`cfjax.kernels.features.normalize_slots` (``f32[..., 4, 7]``)."""
    x = np.asarray(slots_raw, np.float32)
    out = np.zeros_like(x)
    count = np.maximum(x[..., FREQ], np.float32(0.0))
    valid = (x[..., VALID] > 0.5).astype(np.float32)
    keep = valid if present is None else np.asarray(present).astype(np.float32)
    out[..., REL] = np.clip(x[..., REL], -1.0, 1.0)
    out[..., ADM] = np.tanh(x[..., ADM])
    out[..., GAIN] = np.clip(x[..., GAIN], 0.0, 1.0)
    out[..., REUSE] = np.clip(x[..., REUSE], -1.0, 1.0)
    out[..., FREQ] = count / (np.float32(1.0) + count)
    out[..., HELP] = np.where(count > 0.0, np.clip(x[..., HELP], 0.0, 1.0), 0.0)
    out[..., VALID] = valid
    return (out * keep[..., None]).astype(np.float32)


def observation_reference(
    emb_state: np.ndarray,
    emb_draft: np.ndarray,
    slots_raw: np.ndarray,
    budget: np.ndarray,
    proj: np.ndarray,
    present: np.ndarray | None = None,
) -> np.ndarray:
    """NumPy reference of :func:`cfjax.kernels.features.observation` (Eq. 9), written field by field.

    Args:
        emb_state: ``f32[512]``.
        emb_draft: ``f32[512]``.
        slots_raw: ``f32[4, 7]``.
        budget: ``f32[6]``.
        proj: ``f32[32, 512]``.
        present: optional ``bool[4]`` (default: ``VALID``).

    Returns:
        ``f32[98]``.
    """
    proj = np.asarray(proj, np.float32)
    z = np.zeros(OBS_DIM, np.float32)
    z[0:PROJ_DIM] = proj @ np.asarray(emb_state, np.float32)
    z[PROJ_DIM:SLOT_OFFSET] = proj @ np.asarray(emb_draft, np.float32)
    slots = normalize_slots_reference(slots_raw, present)
    for s in range(N_SLOTS):
        for f in range(SLOT_DIM):
            z[SLOT_OFFSET + SLOT_DIM * s + f] = slots[s, f]
    z[BUDGET_OFFSET:] = np.clip(np.asarray(budget, np.float32), 0.0, 1.0)
    return z


def action_mask_reference(slots_raw: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """NumPy reference of :func:`cfjax.kernels.features.action_mask` (``bool[..., 5]``)."""
    valid = np.asarray(slots_raw)[..., VALID] > 0.5 if present is None else np.asarray(present, bool)
    skip = np.ones(valid.shape[:-1] + (1,), dtype=bool)
    return np.concatenate([skip, valid], axis=-1)
