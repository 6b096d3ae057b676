"""Shared pieces of every kernel: the pytree alias, the one sentinel, masked reductions and the
callable types of the kernel factories.

* :data:`NEG` is the single finite large negative of the package. It is what a masked value
  becomes wherever it can reach arithmetic (softmax/logsumexp logits, archive values, EVSI
  values, "not computed" scores, the Eq. 12 max of an all-invalid row). ``-inf`` is used only
  *inside* ``argmax``/``top_k`` inputs (DESIGN "Conventions" 4).
* :func:`masked_argmax` / :func:`masked_max` are the masked reductions every kernel shares.
* The ``Protocol`` classes name the pure functions the factories return (optax's
  ``TransformInitFn`` habit): a factory binds static configuration and returns a raw, unjitted
  function of this type; ``jax.jit``/``jax.vmap`` are the caller's choice.

Nothing here imports from ``cfjax`` (kernels import only ``cfjax.kernels.*``).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import jax
import jax.numpy as jnp

__all__ = [
    "NEG",
    "PyTree",
    "Array",
    "masked_argmax",
    "masked_max",
    "jit_fields",
    "ScoreFn",
    "ParamScoreFn",
    "SelectFn",
    "BeamSearchFn",
    "PathSampleFn",
    "PathLogProbFn",
    "AcquireFn",
    "TrainFn",
    "RunFn",
    "EvaluateFn",
]

#: Any pytree (params, optimiser state, a NamedTuple of arrays).
PyTree = Any
#: A JAX or NumPy array (annotations only).
Array = Any

#: The one finite large negative (``-1e30``, finite in float32 and float64). Masked entries
#: become ``NEG`` wherever they can reach arithmetic; ``-inf`` only ever enters ``argmax``/
#: ``top_k``. ``NEG`` stays finite under the operations the kernels apply to it (a temperature
#: division of an *unmasked* logit never touches it; ``NEG − logsumexp`` is ``NEG``).
NEG = -1e30


def masked_argmax(x: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """``argmax_{j valid} x[..., j]``: an invalid entry never wins; ties to the lowest index.

    Invalid entries become ``-inf`` (only inside the argmax), so any finite valid value beats
    them. A row without valid entries returns 0.

    Args:
        x: ``f32[..., A]`` scores.
        mask: ``bool[..., A]`` valid entries.

    Returns:
        ``i32[...]`` index.
    """
    return jnp.argmax(jnp.where(mask, x, -jnp.inf), axis=-1).astype(jnp.int32)


def masked_max(x: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """``max_{j valid} x[..., j]`` (e.g. the max of the Eq. 12 DQN target).

    Returns exactly the best valid value (no sentinel leaks into a row with a valid entry); a
    row without any valid entry returns the finite :data:`NEG`, never ``-inf``.

    Args:
        x: ``f32[..., A]`` scores.
        mask: ``bool[..., A]`` valid entries.

    Returns:
        ``f32[...]``.
    """
    idx = masked_argmax(x, mask)
    best = jnp.take_along_axis(x, idx[..., None], axis=-1)[..., 0]
    return jnp.where(jnp.any(mask, axis=-1), best, jnp.asarray(NEG, x.dtype))


T = TypeVar("T")


def jit_fields(fns: T, **jit_kwargs) -> T:
    """``jax.jit`` every callable field of a NamedTuple of pure functions (other fields kept).

    The caller-side convenience for the factories that return several functions at once
    (:func:`cfjax.kernels.dqn.make_dqn`, :func:`cfjax.kernels.bandit.make_knn_ucb`).
    """
    return type(fns)(*(jax.jit(f, **jit_kwargs) if callable(f) else f for f in fns))


# ---------------------------------------------------------------------------------------------
# Callable types of the factories' return values (optax style: one Protocol per function type).
# ---------------------------------------------------------------------------------------------
class ScoreFn(Protocol):
    """A set value ``G(c, S)``: ``(context f32[d], pool f32[N, d], members bool[N]) -> f32[]``."""

    def __call__(self, context: Array, pool: Array, members: Array) -> Array: ...


class ParamScoreFn(Protocol):
    """A parameterised set function ``(params, context f32[d_c], pool f32[N, d_m], mask bool[N]) -> f32[...]``
    (:func:`cfjax.kernels.setscore.make_score_fn`: ``f32[]``; ``make_feature_fn``: ``f32[F]``)."""

    def __call__(self, params: PyTree, context: Array, pool: Array, mask: Array) -> Array: ...


class SelectFn(Protocol):
    """One Anti-Persistence mode decision (:func:`cfjax.kernels.bandit.select_mode` bound to a config)."""

    def __call__(self, log: Any, query: Array, iteration: Array, rr_index: Array, key: Array) -> Any: ...


class BeamSearchFn(Protocol):
    """:func:`cfjax.kernels.beam.make_beam_search`'s ``search`` for one task -> ``BeamResult``."""

    def __call__(self, context: Array, pool: Array, costs: Array, valid: Array, budget: Array) -> Any: ...


class PathSampleFn(Protocol):
    """:func:`cfjax.kernels.beam.make_path_sampler`'s ``sample`` for one task -> ``PathSample``."""

    def __call__(self, key: Array, context: Array, pool: Array, costs: Array, valid: Array,
                 budget: Array) -> Any: ...


class PathLogProbFn(Protocol):
    """:func:`cfjax.kernels.beam.make_path_log_prob`'s ``log_prob`` -> ``PathLogProb``."""

    def __call__(self, params: PyTree, context: Array, pool: Array, costs: Array, valid: Array, budget: Array,
                 actions: Array) -> Any: ...


class AcquireFn(Protocol):
    """:func:`cfjax.kernels.acquire.make_acquire`'s ``acquire(key, inputs) -> AcquireResult``."""

    def __call__(self, key: Array, inputs: Any) -> Any: ...


class TrainFn(Protocol):
    """:func:`cfjax.kernels.trainer.make_train`'s ``train(key, hp, table) -> TrainerState``."""

    def __call__(self, key: Array, hp: Any, table: Any) -> Any: ...


class RunFn(Protocol):
    """:func:`cfjax.kernels.trainer.make_train`'s ``run(state, hp, table, *, n_chunks)``."""

    def __call__(self, state: Any, hp: Any, table: Any, *, n_chunks: int) -> Any: ...


class EvaluateFn(Protocol):
    """Greedy evaluation ``(params, hp, table, roots) -> (mean return f32[], solved rate f32[])``."""

    def __call__(self, params: PyTree, hp: Any, table: Any, roots: Array) -> tuple[Array, Array]: ...
