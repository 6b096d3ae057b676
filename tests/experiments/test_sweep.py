"""`cfjax sweep`: grid files, dotted overrides, verdicts, the table and heatmaps, and a tiny real run."""

from __future__ import annotations

import json

import pytest

from cfjax.config import ConfigError, CounterMemConfig
from cfjax.experiments.sweep import DEFAULT_GRID, draw_sweep, format_sweep, load_grid, override, run_sweep, verdicts


def test_the_default_grid_is_shipped_and_loads_for_both_methods():
    for method in ("countermem", "antipersist"):
        full = load_grid(DEFAULT_GRID, method)
        quick = load_grid(DEFAULT_GRID, method, quick=True)
        assert len(full.points()) >= 4 and quick.points()
        assert full.reference in full.rows


def test_override_applies_dotted_keys_and_names_bad_ones():
    cfg = override(CounterMemConfig(), {"scripted.p_error": 0.3, "split_seeds": [7]})
    assert cfg.scripted.p_error == 0.3 and cfg.split_seeds == (7,)
    with pytest.raises(ConfigError, match="scripted.p_nope"):
        override(CounterMemConfig(), {"scripted.p_nope": 1})
    with pytest.raises(ConfigError, match="p_error"):
        override(CounterMemConfig(), {"scripted.p_error": "high"})
    with pytest.raises(ConfigError, match="must be in"):
        override(CounterMemConfig(), {"scripted.p_error": 1.5})


def test_bad_grid_files_are_refused_with_the_reason(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text('[countermem]\nrows = ["cf_memory"]\n[countermem.axes]\n"scripted.p_error" = [0.1]\n')
    with pytest.raises(ConfigError, match="reference row"):
        load_grid(p, "countermem")
    with pytest.raises(ConfigError, match="no \\[antipersist\\] section"):
        load_grid(p, "antipersist")
    with pytest.raises(ConfigError, match="unknown sweep method"):
        load_grid(p, "upliftmem")
    p.write_text("[countermem]\naxes = {}\n")
    with pytest.raises(ConfigError, match="axes"):
        load_grid(p, "countermem")


def _point(p_fix, p_err, gain_lo):
    iv = {"mean": gain_lo + 1, "lo": gain_lo, "hi": gain_lo + 2, "level": 0.95}
    return {"point": {"scripted.p_propose_fix": p_fix, "scripted.p_error": p_err},
            "summary": {"suites": ["sql"], "rows": ["none", "cf_memory"],
                        "table": {"cf_memory": {"sql": {"vs_none": iv}}}, "table_mean": {"cf_memory": {"vs_none": iv}}}}


def test_verdicts_count_where_the_interval_lies(tmp_path):
    pts = [_point(0.25, 0.3, 1.0), _point(0.5, 0.3, -1.0), _point(0.25, 0.5, -3.0), _point(0.5, 0.5, 2.0)]
    payload = {"method": "countermem", "reference": "none", "points": pts, "quick": True, "backbone": "scripted",
               "axes": {"scripted.p_propose_fix": [0.25, 0.5], "scripted.p_error": [0.3, 0.5]}}
    payload["verdicts"] = verdicts(payload)
    assert payload["verdicts"]["cf_memory"]["mean"] == {"above": 2, "contains": 1, "below": 1}
    text = format_sweep(payload)
    assert "cf_memory − none" in text and "+2.0 [+1.0, +3.0]" in text and "2/1/1" in text
    (png,) = draw_sweep(payload, tmp_path)
    assert png.name == "sweep_cf_memory.png" and png.stat().st_size > 1000


@pytest.mark.slow
def test_a_tiny_countermem_sweep_runs_end_to_end(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('[countermem]\nsuites = ["sql"]\nrows = ["none", "cf_memory"]\n'
                    '[countermem.base]\nseeds = [0]\nsplit_seeds = [12345]\n"dqn.total_decisions" = 40\n'
                    '"dqn.checkpoint_every" = 20\n'
                    '[countermem.axes]\n"scripted.p_propose_fix" = [0.0, 1.0]\n'
                    '[countermem.quick]\nmax_tasks = 6\n')
    payload = run_sweep("countermem", grid=grid, out=tmp_path / "out", quick=True, workers=1, log=lambda s: None)
    assert [p["point"] for p in payload["points"]] == [{"scripted.p_propose_fix": 0.0}, {"scripted.p_propose_fix": 1.0}]
    saved = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert saved["grid_text"] == grid.read_text()
    for p in saved["points"]:
        iv = p["summary"]["table"]["cf_memory"]["sql"]["vs_none"]
        assert iv["lo"] <= iv["mean"] <= iv["hi"]
        assert p["outcomes"]["sql"]["12345"]["rows"]["none"]
    assert (tmp_path / "out" / "sweep_cf_memory.png").exists()
    assert "Verdict" in (tmp_path / "out" / "sweep.txt").read_text()
