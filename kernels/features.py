"""The 98-d selector observation of CounterMem (Appendix C.1, Eq. 9).

The memory-use selector sees

    z_t = [P E(s_t) ‖ P E(â_t) ‖ f_{t,1} ‖ … ‖ f_{t,L} ‖ b_t]        (Eq. 9)

with a fixed Gaussian random projection ``P`` (512 → 32, seed 20260824,
never fitted), ``L = 4`` seven-dimensional record slots and six budget
features: ``32 + 32 + 4·7 + 6 = 98`` dimensions.

Layout of ``z`` (``f32[98]``):

=============  ==========================================================
``z[0:32]``    ``P @ E(s)``: projected state embedding
``z[32:64]``   ``P @ E(â)``: projected draft-action embedding
``z[64:92]``   slot ``s`` field ``f`` at ``64 + 7*s + f`` (see below)
``z[92:98]``   remaining-budget features, clipped to ``[0, 1]``
=============  ==========================================================

Slot fields (indices into the last axis of ``slots_raw``) and the
normalisation applied inside :func:`observation`:

=========  ======================================  ===========================
index      raw meaning                              feature
=========  ======================================  ===========================
``REL``    relevance to the state, Eq. 8 cosine     ``clip(x, -1, 1)``
``ADM``    admission score ``S_adm`` (Eq. 4)        ``tanh(x)``
``GAIN``   estimated improvement ``Δ`` from the      ``clip(x, 0, 1)``
           record's evidence
``REUSE``  reuse utility ``u`` (Eq. 6)              ``clip(x, -1, 1)``
``FREQ``   use count ``n``                          ``n' / (1 + n')`` with
                                                    ``n' = max(n, 0)``, in
                                                    ``[0, 1)``
``HELP``   helpful-use fraction                     ``clip(x, 0, 1)``, forced to
                                                    ``0`` when ``n' == 0``
                                                    ("unused" ⇒ zero, App. C.1)
``VALID``  validity flag                            ``1.0`` if ``x > 0.5`` else
                                                    ``0.0``
=========  ======================================  ===========================

Which slots hold a record (*presence*) and whether a record is usable at this
decision (*validity*) are one flag by default: every field of a slot whose
``VALID`` is 0 is zeroed and its action masked, so padded slots (retrieval
returned fewer than ``L`` records, e.g. the fourth slot when ``k = 3``) are
exactly zero in ``z``. With ``present`` given (``bool[..., 4]``) the two come
apart: absent slots are zeroed and masked, and a present slot keeps its
fields with ``VALID`` 0 or 1 as the caller computed it (CounterMem's
``agent.observation = "paper"``: the record's condition holds and its edit
applies to this draft) — a present but invalid record stays selectable. The projected embeddings are not
re-normalised: ``E`` is whatever the retrieval embedder produces (the
hashing embedder returns unit vectors), and ``P`` has entries
``N(0, 1/32)`` so ``‖P e‖ ≈ ‖e‖``.

Action space: action ``0`` is *skip* (execute the draft) and is always
valid; action ``j ∈ {1..4}`` presents slot ``j-1`` and is valid iff that
slot is valid (:func:`action_mask`).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np


__all__ = [
    "ADM",
    "BUDGET_DIM",
    "EMBED_DIM",
    "FREQ",
    "GAIN",
    "HELP",
    "N_ACTIONS",
    "N_SLOTS",
    "OBS_DIM",
    "PROJ_DIM",
    "PROJECTION_SEED",
    "REL",
    "REUSE",
    "SLOT_DIM",
    "SLOT_OFFSET",
    "BUDGET_OFFSET",
    "VALID",
    "action_mask",
    "normalize_slots",
    "observation",
    "projection_matrix",
]

# --------------------------------------------------------------------------
# Dimensions (Appendix C.1).
# --------------------------------------------------------------------------
EMBED_DIM = 512  # retrieval embedding dimension (hashing embedder)
PROJ_DIM = 32  # output dimension of the fixed projection P
N_SLOTS = 4  # L: architectural record slots
SLOT_DIM = 7  # fields per record slot
BUDGET_DIM = 6  # remaining-budget features b_t
N_ACTIONS = 1 + N_SLOTS  # skip + one action per slot
OBS_DIM = 2 * PROJ_DIM + N_SLOTS * SLOT_DIM + BUDGET_DIM  # 98
SLOT_OFFSET = 2 * PROJ_DIM  # 64: first slot feature in z
BUDGET_OFFSET = SLOT_OFFSET + N_SLOTS * SLOT_DIM  # 92: first budget feature
PROJECTION_SEED = 20260824  # seed of P (Appendix C.1)

# Slot-field indices (last axis of ``slots_raw``).
REL = 0  # relevance to the state: Eq. 8 cosine, clipped to [-1, 1]
ADM = 1  # admission score S_adm: tanh
GAIN = 2  # estimated improvement Δ from evidence: clipped to [0, 1]
REUSE = 3  # reuse utility u: clipped to [-1, 1]
FREQ = 4  # use count n: n / (1 + n)
HELP = 5  # helpful-use fraction: clipped to [0, 1], 0 if unused
VALID = 6  # validity: 1 / 0

assert OBS_DIM == 98

# old import paths of the NumPy twins, now in cfjax.kernels.reference.features


@functools.lru_cache(maxsize=8)
def _projection_cached(seed: int, in_dim: int, out_dim: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    proj = rng.normal(loc=0.0, scale=1.0 / np.sqrt(out_dim), size=(out_dim, in_dim))
    proj = proj.astype(np.float32)
    proj.setflags(write=False)  # cached and shared: never mutate
    return proj


def projection_matrix(
    seed: int = PROJECTION_SEED, in_dim: int = EMBED_DIM, out_dim: int = PROJ_DIM
) -> np.ndarray:
    """The fixed random projection ``P`` of Eq. 9.

    Exactly::

        rng = np.random.default_rng(seed)
        P = rng.normal(0.0, 1.0 / np.sqrt(out_dim), size=(out_dim, in_dim))
        P = P.astype(np.float32)

    i.e. i.i.d. entries ``N(0, 1/out_dim)`` (standard deviation
    ``1/sqrt(out_dim)``) drawn in row-major order in float64 and then cast to
    float32. ``P`` is never fitted (Appendix C.1). The result is cached per
    ``(seed, in_dim, out_dim)`` and returned read-only.

    Args:
        seed: Seed of ``np.random.default_rng``; the paper's value is
            ``20260824``.
        in_dim: Embedding dimension (512).
        out_dim: Projected dimension (32).

    Returns:
        ``f32[out_dim, in_dim]`` read-only array.
    """
    return _projection_cached(int(seed), int(in_dim), int(out_dim))


# --------------------------------------------------------------------------
# JAX kernel.
# --------------------------------------------------------------------------
def normalize_slots(slots_raw: jnp.ndarray, present: jnp.ndarray | None = None) -> jnp.ndarray:
    """Normalise raw record-slot features (Appendix C.1; module docstring).

    Args:
        slots_raw: ``f32[..., 4, 7]`` raw slot fields indexed by
            ``REL, ADM, GAIN, REUSE, FREQ, HELP, VALID``.
        present: optional ``bool[..., 4]``: which slots hold a record
            (default: ``VALID > 0.5``).

    Returns:
        ``f32[..., 4, 7]`` normalised fields; every field of an absent slot
        is zero.
    """
    x = jnp.asarray(slots_raw, jnp.float32)
    count = jnp.maximum(x[..., FREQ], 0.0)
    valid = (x[..., VALID] > 0.5).astype(jnp.float32)
    keep = valid if present is None else jnp.asarray(present).astype(jnp.float32)
    fields = jnp.stack(
        [
            jnp.clip(x[..., REL], -1.0, 1.0),
            jnp.tanh(x[..., ADM]),
            jnp.clip(x[..., GAIN], 0.0, 1.0),
            jnp.clip(x[..., REUSE], -1.0, 1.0),
            count / (1.0 + count),
            jnp.where(count > 0.0, jnp.clip(x[..., HELP], 0.0, 1.0), 0.0),
            valid,
        ],
        axis=-1,
    )
    return fields * keep[..., None]


def observation(
    emb_state: jnp.ndarray,
    emb_draft: jnp.ndarray,
    slots_raw: jnp.ndarray,
    budget: jnp.ndarray,
    proj: jnp.ndarray,
    present: jnp.ndarray | None = None,
) -> jnp.ndarray:
    """Selector observation ``z_t`` (Eq. 9) for one decision.

    Pure ``jnp``: jit it, and ``vmap`` it over decisions (``proj`` with
    ``in_axes=None``).

    Args:
        emb_state: ``f32[512]`` retrieval embedding ``E(s_t)`` of the state.
        emb_draft: ``f32[512]`` embedding ``E(â_t)`` of the draft action.
        slots_raw: ``f32[4, 7]`` raw record-slot fields (padded slots have
            ``VALID == 0``).
        budget: ``f32[6]`` remaining-budget features, already normalised
            to ``[0, 1]`` by the caller; clipped to ``[0, 1]`` here.
        proj: ``f32[32, 512]`` fixed projection from
            :func:`projection_matrix`.
        present: optional ``bool[4]``: which slots hold a record (default:
            ``VALID``; module docstring).

    Returns:
        ``f32[98]``: ``[P E(s) ‖ P E(â) ‖ f_1 ‖ f_2 ‖ f_3 ‖ f_4 ‖ b]``; slot
        ``s`` field ``f`` at ``64 + 7*s + f``.
    """
    proj = jnp.asarray(proj, jnp.float32)
    ps = proj @ jnp.asarray(emb_state, jnp.float32)
    pa = proj @ jnp.asarray(emb_draft, jnp.float32)
    slots = normalize_slots(slots_raw, present).reshape(N_SLOTS * SLOT_DIM)
    b = jnp.clip(jnp.asarray(budget, jnp.float32), 0.0, 1.0)
    return jnp.concatenate([ps, pa, slots, b])


def action_mask(slots_raw: jnp.ndarray, present: jnp.ndarray | None = None) -> jnp.ndarray:
    """Valid selector actions: skip plus one per slot that holds a record (Appendix C.1).

    Args:
        slots_raw: ``f32[..., 4, 7]`` raw slot fields.
        present: optional ``bool[..., 4]`` (default: ``VALID > 0.5``).

    Returns:
        ``bool[..., 5]``: index 0 (skip) always ``True``; index ``1 + s`` is
        ``present[..., s]`` (default ``slots_raw[..., s, VALID] > 0.5``).
    """
    valid = jnp.asarray(slots_raw)[..., VALID] > 0.5 if present is None else jnp.asarray(present, bool)
    skip = jnp.ones(valid.shape[:-1] + (1,), dtype=bool)
    return jnp.concatenate([skip, valid], axis=-1)
