"""Acceptance tests of the ``cfjax`` command against bad inputs (issue 12).

Every bad input ends in exactly one line ``cfjax: …`` on stderr naming the
problem, exit status 2 and no user file changed (bytes and mtimes compared);
a non-empty ``--out`` is refused unless ``--force`` or ``--resume`` says what
to do. All in-process (``cfjax.cli.main``), no run does real work: each case
is refused before the expensive part, and the ``--force`` cases stop the run
right after the directory was prepared (``build_suite`` is replaced by a stub).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

import cfjax.domains
from cfjax.cli import main
from cfjax.config import CounterMemConfig, StoreConfig
from cfjax.countermem.store import Candidate, MemoryStore
from cfjax.domains.sql.edits import SQLEdits
from cfjax.infra.io import atomic_write_json


# --------------------------------------------------------------------------- helpers


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every entry under ``root``: a file's bytes and mtime, ``None`` for a directory."""
    out: dict[str, tuple[bytes, int] | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def cli(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr().err


def one_line(rc: int, err: str, *needles: str, status: int = 2) -> None:
    assert rc == status, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("cfjax: ") and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """A directory holding the user's own report.txt and config.toml (what an attacker would clobber)."""
    d = tmp_path / "mine"
    d.mkdir()
    (d / "report.txt").write_text("my hand-written report\n")
    (d / "config.toml").write_text("# my config\nseeds = [7]\n")
    old = time.time() - 1000
    for p in d.iterdir():
        os.utime(p, (old, old))
    return d


class Stop(Exception):
    """Raised by the stubbed build_suite: the run stops right after preparing its directory."""


@pytest.fixture
def stop_after_prepare(monkeypatch):
    def stub(*a, **k):
        raise Stop("stopped by the test after the output directory was prepared")

    monkeypatch.setattr(cfjax.domains, "build_suite", stub)


# --------------------------------------------------------------------------- an existing --out is refused


REFUSED = {
    "countermem run": ["countermem", "run", "--suite", "sql", "--out"],
    "antipersist run": ["antipersist", "run", "--suite", "sql", "--out"],
    "sweep": ["sweep", "--method", "countermem", "--out"],
    "countermem table": ["countermem", "table", "--out"],
    "upliftmem controlled": ["upliftmem", "controlled", "--out"],
    "upliftmem stores": ["upliftmem", "stores", "--suite", "sql", "--out"],
}


@pytest.mark.parametrize("cmd", list(REFUSED))
def test_non_empty_out_is_refused(capsys, user_dir, cmd):
    before = snapshot(user_dir)
    rc, err = cli(capsys, *REFUSED[cmd], user_dir)
    one_line(rc, err, f"output directory {user_dir} is not empty", "config.toml", "report.txt", "--force",
             f"cfjax {cmd}")
    if cmd == "countermem table":
        assert "--resume to continue the build" in err
    else:
        assert "cannot --resume" in err
    assert snapshot(user_dir) == before


def test_second_run_of_the_readme_command_says_force_or_resume(capsys, tmp_path, monkeypatch):
    """``cfjax countermem run --suite all --out runs/countermem`` twice: the second one explains itself."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "countermem"
    for rel in ("config.toml", "results.json", "report.txt", "sql/split_12345/seed_0/store.json"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("{}")
    before = snapshot(run)
    rc, err = cli(capsys, "countermem", "run", "--suite", "all", "--out", "runs/countermem")
    one_line(rc, err, "runs/countermem is not empty", "pass --force", "--resume")
    assert snapshot(run) == before


@pytest.mark.parametrize("args", [
    ["countermem", "run", "--suite", "sql", "--resume", "--out"],
    ["antipersist", "run", "--suite", "sql", "--resume", "--out"],
    ["sweep", "--method", "antipersist", "--resume", "--out"],
    ["upliftmem", "controlled", "--resume", "--out"],
    ["upliftmem", "stores", "--resume", "--out"],
])
def test_resume_where_a_command_cannot_resume(capsys, user_dir, args):
    before = snapshot(user_dir)
    one_line(*cli(capsys, *args, user_dir), "cannot resume", "--force")
    one_line(*cli(capsys, *args, user_dir.parent / "fresh"), "cannot resume")  # whatever the directory holds
    assert snapshot(user_dir) == before and not (user_dir.parent / "fresh").exists()


def test_force_and_resume_together_is_a_usage_error(capsys, user_dir):
    one_line(*cli(capsys, "countermem", "run", "--out", user_dir, "--force", "--resume"),
             "--resume: not allowed with argument --force")


def test_report_refuses_a_non_empty_figure_directory(capsys, tmp_path, user_dir):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"summary": {}}))
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "report", run, "--out", user_dir), "not empty", "--force")
    one_line(*cli(capsys, "countermem", "report", run, "--out", user_dir, "--resume"), "cannot resume")
    assert snapshot(tmp_path) == before


def test_train_selectors_refuses_an_existing_output_file(capsys, tmp_path, user_dir):
    table = tmp_path / "table"
    table.mkdir()
    (table / "selectors.json").write_text("{}")
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", table, "--out", user_dir / "report.txt"),
             f"output file {user_dir / 'report.txt'} already exists", "--force")
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", table),  # the default TABLE/selectors.json
             "selectors.json already exists")
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", table, "--out", user_dir),
             "is a directory")
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", table, "--resume"), "cannot resume")
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- --force: only what the command wrote


def _populate(root: Path, rels: list[str]) -> None:
    for rel in rels:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"old {rel}")


_USER_FILES = ["notes.md", "sql/my_analysis.py", "figures/my_plot.png", "suites/my_suite/README"]


@pytest.mark.parametrize("args,owned", [
    (["countermem", "run", "--suite", "sql"],
     ["config.toml", "results.json", "report.txt", "suites/sql/db.sqlite", "sql/split_12345/seed_0/store.json",
      "pybugs/split_1/seed_2/selector/meta.json", "figures/transfer.png", ".results.json.12.0123456789abcdef.tmp"]),
    (["antipersist", "run", "--suite", "sql"],
     ["config.toml", "results.json", "report.txt", ".world_cache/sql.sqlite", "suites/sat/x.cnf",
      "sql/results.json", "sql/success_by_iteration.png", "sql/split_1/seed_42/anti_persistence.outcomes.jsonl"]),
    (["sweep", "--method", "countermem"],
     ["sweep.json", "sweep.txt", "sweep_cf_memory.png", "suites/sql/db.sqlite", "point_00/results.json"]),
    (["countermem", "table", "--suite", "sql"],
     ["store.json", "build.json", "parts/000000.npz", "table.npz", "table.json", "selectors.json",
      "suites/sql/db.sqlite"]),
    (["upliftmem", "stores", "--suite", "sql"],
     ["results.json", "report.txt", "suites/sql/db.sqlite", ".results.json.12.0123456789abcdef.tmp"]),
])
def test_force_removes_what_the_command_wrote_and_keeps_the_rest(capsys, tmp_path, stop_after_prepare, args, owned):
    out = tmp_path / "out"
    _populate(out, owned + _USER_FILES)
    user_before = {k: v for k, v in snapshot(out).items() if k in _USER_FILES}
    rc, err = cli(capsys, *args, "--out", out, "--force")
    # the stub stopped the run: an unexpected exception is one line with status 1 and the --debug hint
    one_line(rc, err, "internal error: Stop: stopped by the test", "run with --debug for the traceback", status=1)
    for rel in owned:  # gone (or already rewritten by the new run, e.g. its config.toml)
        assert not (out / rel).exists() or (out / rel).read_text() != f"old {rel}", rel
    assert {k: v for k, v in snapshot(out).items() if k in _USER_FILES} == user_before


def test_debug_shows_the_traceback(capsys, tmp_path, stop_after_prepare):
    with pytest.raises(Stop):
        main(["--debug", "countermem", "run", "--suite", "sql", "--out", str(tmp_path / "a")])
    with pytest.raises(Stop):
        main(["countermem", "run", "--suite", "sql", "--out", str(tmp_path / "b"), "--debug"])
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x").write_text("x")
    from cfjax.infra.io import OutputExistsError

    with pytest.raises(OutputExistsError):
        main(["countermem", "run", "--suite", "sql", "--out", str(tmp_path / "c"), "--debug"])


# --------------------------------------------------------------------------- bad config values


@pytest.mark.parametrize("text,needle", [
    ('seeds = "x"\n', "config key 'seeds': expected a list of int, got str \"x\""),
    ("dqn = 3\n", "config key 'dqn': expected a table (DQNConfig), got int 3"),
    ("[store]\ncapacity = 0\n", "[store]: StoreConfig.capacity must be ≥ 1"),
    ("seeds = [\n", "invalid TOML"),
])
def test_bad_config_values(capsys, tmp_path, user_dir, text, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "run", "--suite", "sql", "--out", user_dir, "--config", cfg), needle)
    one_line(*cli(capsys, "countermem", "table", "--out", tmp_path / "t", "--config", cfg), needle)
    assert snapshot(tmp_path) == before


def test_config_is_a_directory(capsys, tmp_path, user_dir):
    before = snapshot(tmp_path)
    for args in (["countermem", "run", "--suite", "sql", "--out", user_dir],
                 ["antipersist", "run", "--suite", "sql", "--out", tmp_path / "o"],
                 ["countermem", "table", "--out", tmp_path / "o"]):
        one_line(*cli(capsys, *args, "--config", user_dir), "config path is a directory")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("args,needle", [
    (["countermem", "run", "--seeds", "x"], "argument --seeds: expected an integer, got 'x'"),
    (["countermem", "run", "--decisions", "0"], "argument --decisions: expected an integer >= 1, got 0"),
    (["countermem", "run", "--workers", "-2"], "argument --workers"),
    (["countermem", "run", "--rows", "nope"], "--rows: unknown row(s) ['nope']"),
    (["antipersist", "run", "--rows", "nope"], "unknown row(s) ['nope']"),
    (["antipersist", "run", "--iterations", "0"], "argument --iterations"),
    (["countermem", "table", "--suite", "nope"], "unknown suite 'nope'"),
    (["countermem", "table", "--samples", "0"], "argument --samples"),
    (["countermem", "run", "--bogus"], "cfjax: unrecognized arguments: --bogus (see cfjax --help)"),
    (["countermem", "run", "--seeds", "-1"], "cfjax: countermem run: argument --seeds"),
    (["upliftmem", "controlled", "--stores", "nope"], "--stores: unknown store(s) ['nope']"),
    (["upliftmem", "controlled", "--variants", "nope"], "--variants: unknown row(s) ['nope']"),
    (["upliftmem", "controlled", "--k", "0"], "cfjax: upliftmem controlled: argument --k"),
    (["upliftmem", "controlled", "--backbone", "openai"], "answered by its frozen scripted answerer"),
    (["upliftmem", "controlled", "--backbone", "nope"], "argument --backbone: 'nope'"),
    (["upliftmem", "stores", "--suite", "nope"], "unknown suite 'nope'"),
    (["upliftmem", "stores", "--stores", "nope"], "--stores: unknown store(s) ['nope']"),
    (["upliftmem", "stores", "--ap-row", "nope"], "--ap-row: choose anti_persistence or trajectory_memory"),
    (["upliftmem", "stores", "--epochs", "0"], "cfjax: upliftmem stores: argument --epochs"),
    (["upliftmem", "stores", "--set", "nope=1"], "--set nope=1: unknown config key 'nope'"),
])
def test_bad_flags(capsys, tmp_path, args, needle):
    one_line(*cli(capsys, *args, "--out", tmp_path / "o"), needle)
    assert not (tmp_path / "o").exists()


def test_bad_train_selectors_flags(capsys, tmp_path):
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", tmp_path, "--seeds", "4-1"), "--seeds: ")
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", tmp_path, "--grid", "nope=1"), "--grid: ")
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", tmp_path / "none"), "no decision table")
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", tmp_path, "--decisions", "100"),
             "decisions (100) must be a multiple of checkpoint_every (250)")


@pytest.mark.parametrize("text,needle", [
    ("countermem = 3\n", "[countermem] must be a table"),
    ("[countermem]\naxes = 3\n", "[countermem.axes] must be a table"),
    ("[countermem]\nrows = \"none\"\n[countermem.axes]\n\"scripted.p_error\" = [0.5]\n", "rows must be a list"),
    ("[countermem]\nrows = [\"none\", \"bogus\"]\n[countermem.axes]\n\"scripted.p_error\" = [0.5]\n", "unknown row(s)"),
    ("[countermem.axes]\n\"scripted.p_error\" = [\"high\"]\n", "scripted.p_error"),
    ("\xff", "not UTF-8"),
])
def test_bad_grid_file(capsys, tmp_path, text, needle):
    grid = tmp_path / "grid.toml"
    grid.write_bytes(text.encode("latin-1") if text == "\xff" else text.encode())
    rc, err = cli(capsys, "sweep", "--method", "countermem", "--grid", grid, "--out", tmp_path / "o")
    one_line(rc, err, needle)
    assert not (tmp_path / "o").exists()  # refused before the output directory was touched
    one_line(*cli(capsys, "sweep", "--method", "countermem", "--grid", tmp_path, "--out", tmp_path / "o"),
             "is a directory")


# --------------------------------------------------------------------------- corrupt input files


def _tiny_table(d: Path) -> None:
    from cfjax.countermem.table import TableMeta, save_table
    from cfjax.kernels.trainer import DecisionTable, table_hash

    R, A = 2, 5
    mask = np.zeros((R, A), bool)
    mask[:, 0] = True
    t = DecisionTable(np.zeros((R, 98), np.float32), mask, mask.astype(np.float32), np.zeros((R, A), np.float32),
                      np.zeros((R, A), np.float32), np.zeros((R, A), bool), np.full((R, A), -1, np.int32),
                      np.array([0], np.int32), np.array([1], np.int32), np.array([], np.int32))
    d.mkdir()
    save_table(d, t, TableMeta(table_hash(t), R, {"train": 1, "val": 1, "eval": 0}, 2, 1, "scripted", "sql", 0))


def test_truncated_table_npz(capsys, tmp_path):
    table = tmp_path / "table"
    _tiny_table(table)
    npz = table / "table.npz"
    npz.write_bytes(npz.read_bytes()[:300])
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", table), "corrupt file", "table.npz",
             "truncated or damaged")
    assert snapshot(tmp_path) == before


def test_train_selectors_on_a_layout_the_table_lacks(capsys, tmp_path):
    """--observation names a layout the table does not hold: one line naming the table and what it holds."""
    table = tmp_path / "table"
    _tiny_table(table)  # one unnamed obs array whose root budget reads as "paper" (attempt index 0)
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", table, "--observation", "legacy"),
             f"decision table {table} holds the observation layout(s) paper only, not 'legacy'")
    rc, err = cli(capsys, "countermem", "train-selectors", "--table", table, "--observation", "neither")
    assert rc == 2 and "invalid choice: 'neither'" in err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("change,needle", [
    (lambda m: {**m, "extra": 1}, "unknown key(s) ['extra']"),
    (lambda m: {k: v for k, v in m.items() if k != "hash"}, "missing key(s) ['hash']"),
    (lambda m: {**m, "rows": "2"}, "key 'rows' must be int"),
    (lambda m: "[" * 100_000, "nested deeper than"),
])
def test_bad_table_json(capsys, tmp_path, change, needle):
    table = tmp_path / "table"
    _tiny_table(table)
    meta = json.loads((table / "table.json").read_text())
    new = change(meta)
    (table / "table.json").write_text(new if isinstance(new, str) else json.dumps(new))
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "train-selectors", "--table", table), "corrupt file", "table.json", needle)
    assert snapshot(tmp_path) == before


def _store_payload() -> dict:
    store = MemoryStore(StoreConfig(), edits=SQLEdits())
    for i, (ub, ua) in enumerate([("age > 30", "age >= 30"), ("SELECT city", "SELECT DISTINCT city")]):
        store.admit(Candidate(f"src/{i}", f"situation {i}", f"q {ub}", f"q {ua}", ub, ua, "checked", "none", 0.0, 1.0))
    assert len(store) == 2
    store.freeze()
    return store.to_payload()


@pytest.mark.parametrize("make,needle", [
    (lambda p: atomic_write_json(p, {**_store_payload(), "next_id": 0}), "next_id 0 is not above every record id"),
    (lambda p: atomic_write_json(p, {**_store_payload(), "records": _store_payload()["records"] * 2}),
     "appears twice"),
    (lambda p: p.write_text("[" * 100_000), "nested deeper than"),
    (lambda p: p.write_text('{"format": "cfjax/1", "sha256": "00", "payload": {}}'), "checksum mismatch"),
])
def test_table_resume_with_a_bad_store(capsys, tmp_path, make, needle):
    """A store with a valid checksum but a broken invariant is refused before anything is written."""
    out = tmp_path / "t"
    out.mkdir()
    make(out / "store.json")
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "table", "--suite", "sql", "--out", out, "--resume"),
             f"corrupt file {str(out / 'store.json')!r}", needle)
    assert snapshot(tmp_path) == before  # not even the suite was built


def test_table_resume_with_a_corrupt_build_json(capsys, tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    (out / "build.json").write_text('{"samples": 4')
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "table", "--out", out, "--resume"), "build.json", "not valid JSON")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("text,needle", [
    ("[" * 100_000, "nested deeper than"),
    ('{"summary": ', "truncated JSON"),
    ("[]", "no 'summary' object"),
])
def test_report_of_a_corrupt_results_json(capsys, tmp_path, text, needle):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(text)
    before = snapshot(tmp_path)
    one_line(*cli(capsys, "countermem", "report", run), "results.json", needle)
    assert snapshot(tmp_path) == before


def test_missing_paths_are_one_line(capsys, tmp_path):
    one_line(*cli(capsys, "countermem", "report", tmp_path / "nowhere"), "no results.json")
    one_line(*cli(capsys, "countermem", "run", "--out", tmp_path / "o", "--config", tmp_path / "none.toml"),
             "config file not found")


def test_an_out_path_that_is_a_file(capsys, user_dir):
    before = snapshot(user_dir)
    one_line(*cli(capsys, "countermem", "run", "--suite", "sql", "--out", user_dir / "report.txt", "--force"),
             "exists and is not a directory")
    assert snapshot(user_dir) == before


def test_a_newline_in_a_path_stays_on_one_line(capsys, tmp_path):
    d = tmp_path / "bad\nname"
    d.mkdir()
    (d / "x").write_text("x")
    one_line(*cli(capsys, "countermem", "run", "--suite", "sql", "--out", d), "bad\\nname")


def test_unexpected_errors_are_one_line_with_status_1(capsys, tmp_path, monkeypatch):
    import cfjax.experiments.countermem.runner as cem

    def boom(*a, **k):
        raise ZeroDivisionError("a bug\nspanning lines")

    monkeypatch.setattr(cem, "run_main", boom)
    one_line(*cli(capsys, "countermem", "run", "--suite", "sql", "--out", tmp_path / "o"),
             "internal error: ZeroDivisionError: a bug\\nspanning lines (run with --debug for the traceback)",
             status=1)
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "countermem", "run", "--suite", "sql", "--out", str(tmp_path / "o")])


def test_library_entry_points_refuse_by_default(tmp_path, user_dir):
    """Programmatic callers get the same protection (``existing="refuse"`` is the default)."""
    from cfjax.config import APConfig
    from cfjax.experiments import sweep
    from cfjax.experiments.antipersist import runner as antipersist
    from cfjax.experiments.countermem import runner as countermem, selectors
    from cfjax.infra.io import OutputExistsError

    before = snapshot(user_dir)
    with pytest.raises(OutputExistsError):
        countermem.run_main(CounterMemConfig(), suites=["sql"], out=user_dir, log=lambda s: None)
    with pytest.raises(OutputExistsError):
        antipersist.run_main(APConfig(), suites=["sql"], out=user_dir, log=lambda s: None)
    with pytest.raises(OutputExistsError):
        sweep.run_sweep("countermem", out=user_dir, log=lambda s: None)
    with pytest.raises(OutputExistsError):
        selectors.table_main(CounterMemConfig(), suite="sql", out=user_dir, log=lambda s: None)
    with pytest.raises(OutputExistsError):
        selectors.train_selectors_main(tmp_path, out=user_dir / "report.txt", log=lambda s: None)
    assert snapshot(user_dir) == before
