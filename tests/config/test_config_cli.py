"""The CLI refuses a bad --config with one line on stderr, exit status 2 and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cfjax.cli import main


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cfjax.cli", *args], capture_output=True, text=True, timeout=300)


def _one_line_error(r, needle: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("cfjax: ") and needle in lines[0]
    assert "Traceback" not in r.stderr


def test_config_directory_exits_2(tmp_path: Path):
    r = _run(["countermem", "run", "--suite", "sql", "--out", str(tmp_path / "out"), "--config", str(tmp_path)])
    _one_line_error(r, "directory")
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_wrong_type_exits_2(tmp_path: Path):
    p = tmp_path / "bad.toml"
    p.write_text('[store]\ncapacity = "lots"\n')
    r = _run(["countermem", "run", "--suite", "sql", "--out", str(tmp_path / "out"), "--config", str(p)])
    _one_line_error(r, "config key 'store.capacity': expected int, got str \"lots\"")


@pytest.mark.parametrize("text,needle", [
    ('seeds = "012"\n', "config key 'seeds': expected a list of int"),
    ("[synthesis]\nmax_rule = 2\n", "'synthesis.max_rule'"),
    ("seeds = [\n", "invalid TOML"),
])
def test_antipersist_bad_config_in_process(tmp_path: Path, capsys, text: str, needle: str):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    rc = main(["antipersist", "run", "--suite", "sql", "--out", str(tmp_path / "out"), "--config", str(p)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("cfjax: ") and needle in err


def test_missing_config_and_unknown_suite_in_process(tmp_path: Path, capsys):
    rc = main(["countermem", "table", "--out", str(tmp_path / "t"), "--config", str(tmp_path / "none.toml")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("cfjax: config file not found") and err.count("\n") == 1
    rc = main(["countermem", "run", "--suite", "nope", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown suite 'nope'" in err


def test_flag_overrides_apply_after_quick(tmp_path: Path):
    from cfjax.cli import _antipersist_config, _countermem_config, build_parser
    from cfjax.config import save_toml, CounterMemConfig
    import dataclasses

    p = tmp_path / "c.toml"
    save_toml(dataclasses.replace(CounterMemConfig(), n_val=5), p)
    args = build_parser().parse_args(["countermem", "run", "--out", "x", "--quick", "--seeds", "3", "4",
                                      "--decisions", "50", "--config", str(p)])
    cfg = _countermem_config(args)
    assert cfg.seeds == (3, 4) and cfg.dqn.total_decisions == 50 and cfg.dqn.checkpoint_every == 100
    assert cfg.n_val == 5 and cfg.experiment.accumulation_checkpoints == (0, 8, 16, 32)
    args = build_parser().parse_args(["antipersist", "run", "--out", "x", "--quick", "--iterations", "2"])
    ap = _antipersist_config(args)
    assert (ap.iterations, ap.tasks_per_iteration, ap.max_eval_tasks, ap.seeds) == (2, 20, 40, (42,))
