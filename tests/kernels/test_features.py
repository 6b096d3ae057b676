"""Tests for the 98-d selector observation (CounterMem App. C.1, Eq. 9)."""

import jax
import numpy as np
import pytest

import cfjax.kernels as F
from cfjax.kernels import reference as R
from cfjax.kernels.features import _projection_cached

OBS = jax.jit(F.observation)
OBS_BATCH = jax.jit(jax.vmap(F.observation, in_axes=(0, 0, 0, 0, None)))
MASK = jax.jit(F.action_mask)


@pytest.fixture(scope="module")
def proj():
    return F.projection_matrix()


def _random_inputs(rng, n=None):
    lead = () if n is None else (n,)
    es = rng.normal(size=lead + (512,)).astype(np.float32)
    ea = rng.normal(size=lead + (512,)).astype(np.float32)
    slots = np.empty(lead + (4, 7), np.float32)
    slots[..., F.REL] = rng.uniform(-1.5, 1.5, size=lead + (4,))
    slots[..., F.ADM] = rng.normal(scale=2.0, size=lead + (4,))
    slots[..., F.GAIN] = rng.uniform(-0.5, 1.5, size=lead + (4,))
    slots[..., F.REUSE] = rng.uniform(-1.5, 1.5, size=lead + (4,))
    slots[..., F.FREQ] = rng.integers(0, 6, size=lead + (4,))
    slots[..., F.HELP] = rng.uniform(-0.2, 1.2, size=lead + (4,))
    slots[..., F.VALID] = rng.integers(0, 2, size=lead + (4,))
    budget = rng.uniform(-0.3, 1.3, size=lead + (6,)).astype(np.float32)
    return es, ea, slots, budget


def test_constants():
    assert F.OBS_DIM == 98 == 32 + 32 + 4 * 7 + 6
    assert (F.N_SLOTS, F.SLOT_DIM, F.BUDGET_DIM, F.N_ACTIONS) == (4, 7, 6, 5)
    assert (F.REL, F.ADM, F.GAIN, F.REUSE, F.FREQ, F.HELP, F.VALID) == tuple(range(7))


def test_projection_deterministic_and_documented(proj):
    assert proj.shape == (32, 512) and proj.dtype == np.float32
    again = F.projection_matrix(20260824)
    assert again is proj  # cached
    fresh = _projection_cached.__wrapped__(20260824, 512, 32)
    np.testing.assert_array_equal(fresh, proj)
    expected = (
        np.random.default_rng(20260824).normal(0.0, 1.0 / np.sqrt(32), size=(32, 512)).astype(np.float32)
    )
    np.testing.assert_array_equal(proj, expected)
    assert not proj.flags.writeable
    assert not np.array_equal(F.projection_matrix(1), proj)
    # N(0, 1/32): variance close to 1/32.
    assert abs(proj.var() - 1 / 32) < 0.1 / 32


def test_embedding_and_budget_blocks(proj):
    rng = np.random.default_rng(0)
    es, ea, slots, budget = _random_inputs(rng)
    z = np.asarray(OBS(es, ea, slots, budget, proj))
    assert z.shape == (98,) and z.dtype == np.float32
    np.testing.assert_allclose(z[0:32], proj @ es, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z[32:64], proj @ ea, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(z[92:98], np.clip(budget, 0.0, 1.0))


def _expected_field(f, x, count):
    if f == F.REL:
        return np.clip(x, -1, 1)
    if f == F.ADM:
        return np.tanh(x)
    if f == F.GAIN:
        return np.clip(x, 0, 1)
    if f == F.REUSE:
        return np.clip(x, -1, 1)
    if f == F.FREQ:
        return count / (1 + count)
    if f == F.HELP:
        return np.clip(x, 0, 1) if count > 0 else 0.0
    return 1.0


@pytest.mark.parametrize("slot", range(4))
def test_slot_layout_field_by_field(proj, slot):
    """Each field of each slot lands at 64 + 7*slot + field, normalised."""
    zeros512 = np.zeros(512, np.float32)
    budget = np.zeros(6, np.float32)
    raw_values = {
        F.REL: [1.7, -0.4, -3.0],
        F.ADM: [0.5, -2.0, 10.0],
        F.GAIN: [0.3, -0.2, 4.0],
        F.REUSE: [-1.2, 0.6, 2.0],
        F.FREQ: [0.0, 1.0, 3.0],
        F.HELP: [0.25, 1.5, -0.3],
    }
    for field, values in raw_values.items():
        for value in values:
            for count in (0.0, 2.0):
                slots = np.zeros((4, 7), np.float32)
                slots[slot, F.VALID] = 1.0
                slots[slot, F.FREQ] = count
                slots[slot, field] = value
                z = np.asarray(OBS(zeros512, zeros512, slots, budget, proj))
                c = slots[slot, F.FREQ]
                want = np.zeros(98, np.float32)
                want[64 + 7 * slot + F.VALID] = 1.0
                want[64 + 7 * slot + F.FREQ] = c / (1 + c)
                want[64 + 7 * slot + F.ADM] = np.tanh(0.0)
                want[64 + 7 * slot + field] = _expected_field(field, value, c)
                np.testing.assert_allclose(z, want, rtol=1e-6, atol=1e-7, err_msg=f"field={field} v={value} n={c}")
                np.testing.assert_allclose(
                    R.observation_reference(zeros512, zeros512, slots, budget, proj), want, rtol=1e-6, atol=1e-7
                )


def test_helpful_fraction_zero_when_unused(proj):
    slots = np.zeros((4, 7), np.float32)
    slots[:, F.VALID] = 1
    slots[:, F.HELP] = 0.8
    slots[:, F.FREQ] = [0, 1, 0, 4]
    z = np.asarray(OBS(np.zeros(512), np.zeros(512), slots, np.zeros(6), proj))
    helps = z[64 + F.HELP : 92 : 7]
    np.testing.assert_allclose(helps, [0.0, 0.8, 0.0, 0.8], rtol=1e-6)
    np.testing.assert_allclose(z[64 + F.FREQ : 92 : 7], [0.0, 0.5, 0.0, 0.8], rtol=1e-6)


def test_invalid_slot_zeroed(proj):
    rng = np.random.default_rng(1)
    es, ea, slots, budget = _random_inputs(rng)
    slots[:, F.FREQ] = 3.0
    slots[:, F.ADM] = 1.0
    slots[:, F.VALID] = [1, 0, 1, 0]
    z = np.asarray(OBS(es, ea, slots, budget, proj))
    for s in range(4):
        block = z[64 + 7 * s : 64 + 7 * (s + 1)]
        if s in (1, 3):
            np.testing.assert_array_equal(block, np.zeros(7))
        else:
            assert block[F.VALID] == 1.0 and block[F.FREQ] > 0 and block[F.ADM] != 0
    # The padded fourth slot (k = 3) is exactly zero whatever it holds.
    slots[3] = 5.0
    slots[3, F.VALID] = 0.0
    z = np.asarray(OBS(es, ea, slots, budget, proj))
    np.testing.assert_array_equal(z[85:92], np.zeros(7))


def test_jit_and_vmap_match_reference(proj):
    rng = np.random.default_rng(2)
    n = 16
    es, ea, slots, budget = _random_inputs(rng, n)
    zb = np.asarray(OBS_BATCH(es, ea, slots, budget, proj))
    assert zb.shape == (n, 98)
    for i in range(n):
        ref = R.observation_reference(es[i], ea[i], slots[i], budget[i], proj)
        np.testing.assert_allclose(zb[i], ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(OBS(es[i], ea[i], slots[i], budget[i], proj)), zb[i], rtol=1e-5, atol=1e-5)
    # Un-jitted call agrees too.
    np.testing.assert_allclose(np.asarray(F.observation(es[0], ea[0], slots[0], budget[0], proj)), zb[0], atol=1e-5)


def test_action_mask(proj):
    rng = np.random.default_rng(3)
    _, _, slots, _ = _random_inputs(rng, 32)
    m = np.asarray(MASK(slots))
    assert m.shape == (32, 5) and m.dtype == bool
    assert m[:, 0].all()
    np.testing.assert_array_equal(m[:, 1:], slots[:, :, F.VALID] > 0.5)
    np.testing.assert_array_equal(m, R.action_mask_reference(slots))
    only_skip = np.asarray(MASK(np.zeros((4, 7), np.float32)))
    np.testing.assert_array_equal(only_skip, [True, False, False, False, False])


def test_outputs_bounded(proj):
    rng = np.random.default_rng(4)
    es, ea, slots, budget = _random_inputs(rng, 64)
    slots = slots * 100.0  # extreme raw values
    slots[..., F.VALID] = 1.0
    zb = np.asarray(OBS_BATCH(es, ea, slots, budget * 10, proj))
    assert np.all(np.isfinite(zb))
    assert np.all(np.abs(zb[:, 64:]) <= 1.0)
    assert np.all(zb[:, 92:] >= 0.0)


OBS_PRESENT_BATCH = jax.jit(jax.vmap(F.observation, in_axes=(0, 0, 0, 0, None, 0)))


def test_presence_apart_from_validity(proj):
    """With ``present`` given, an absent slot is zeroed and masked whatever its fields, and a present slot
    whose VALID is 0 keeps its fields (VALID feature 0) and stays selectable."""
    rng = np.random.default_rng(7)
    es, ea, slots, budget = _random_inputs(rng)
    slots[:, F.FREQ] = 2.0
    slots[:, F.VALID] = [1.0, 0.0, 1.0, 0.0]
    present = np.array([True, True, False, False])
    z = np.asarray(OBS(es, ea, slots, budget, proj, present))
    blk = z[F.SLOT_OFFSET:F.BUDGET_OFFSET].reshape(4, 7)
    assert np.all(blk[2:] == 0.0)  # absent: zero, even slot 2 with VALID 1
    assert blk[1, F.VALID] == 0.0 and blk[1, F.REL] == pytest.approx(np.clip(slots[1, F.REL], -1, 1), abs=1e-6)
    assert blk[1, F.FREQ] == pytest.approx(2.0 / 3.0) and blk[0, F.VALID] == 1.0
    assert np.asarray(MASK(slots, present)).tolist() == [True, True, True, False, False]
    assert R.action_mask_reference(slots, present).tolist() == [True, True, True, False, False]
    # present=None is the default layout: presence is VALID
    np.testing.assert_array_equal(np.asarray(OBS(es, ea, slots, budget, proj)),
                                  np.asarray(OBS(es, ea, slots, budget, proj, slots[:, F.VALID] > 0.5)))


def test_presence_jit_vmap_matches_reference(proj):
    rng = np.random.default_rng(11)
    es, ea, slots, budget = _random_inputs(rng, 16)
    present = rng.integers(0, 2, size=(16, 4)).astype(bool)
    got = np.asarray(OBS_PRESENT_BATCH(es, ea, slots, budget, proj, present))
    want = np.stack([R.observation_reference(es[i], ea[i], slots[i], budget[i], proj, present[i]) for i in range(16)])
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(MASK(slots, present)), R.action_mask_reference(slots, present))
