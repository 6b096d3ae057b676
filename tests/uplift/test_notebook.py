"""notebooks/upliftmem.ipynb executes top to bottom and shows what it says it shows (slow: ~2 minutes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "upliftmem.ipynb"


@pytest.mark.slow
def test_upliftmem_notebook_executes(tmp_path):
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    from cfjax.experiments.notebooks import execute_notebook, summarize

    nb = execute_notebook(NOTEBOOK, workdir=tmp_path)
    s = summarize(nb)
    assert s["errors"] == 0
    assert s["pngs"] == 3  # walkthrough learning curve, three scorers' curves, the result figure
    assert not any("execution" in c.metadata for c in nb.cells)  # volatile timestamps stripped
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "scripted backbone (seeded simulator, not an LLM)" in text
    # (a) the memory: seed pool, validated writing, a rejected version, the scope feature
    assert "seed pool" in text and "u = U(τ_m) − U(τ_∅)" in text and "REJECTED version" in text
    assert "APPLIES:" in text and "DOES NOT APPLY:" in text and "scope" in text
    # (b) the sets
    assert "beam search (W = 2)" in text and "similarity top-" in text and "∅" in text
    # (c) several scorers trained at once
    assert "3 scorers trained on sql" in text and "no_policy" in text
    # (d) one probing window, EVSI against random
    assert "probe pool:" in text and "comparison family:" in text and "V_t(q)" in text
    assert re.search(r"batch decision value .*: EVSI \d+\.\d+ vs random \d+\.\d+", text)
    # (e) the table with intervals and the synthetic ranking accuracy
    assert "row" in text and "vs no_memory" in text and "vs upliftmem" in text and "train execs" in text
    assert re.search(r"upliftmem\s+\d+\.\d \[\d+\.\d, \d+\.\d\]", text)  # success with its interval
    assert "random_probing" in text and "untrained" in text and "pairwise acc" in text
