"""benchmarks/render.py: RESULTS.md tables regenerated from result JSONs, stale and hand-edited tables
caught by ``--check``; benchmarks/_bench.py: thread settings that really apply. Runs no benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import render
from benchmarks._meta import ROOT, inputs_hash, table, write_result

SOURCES = ["benchmarks/_meta.py"]
ARGS = {"n": 3, "quick": True}

PROSE_TOP = "# Results\n\nHand-written prose stays.\n\n"
MD = (PROSE_TOP + "<!-- table:fake/main -->\nold text\n<!-- /table -->\n\nBetween the tables.\n\n"
      "<!-- table:fake/second -->\n<!-- /table -->\n\n## Not run yet\n\n<!-- table:absent/x -->\n<!-- /table -->\n")


def fake_result(results: Path, *, busy: float = 0.02, sha: str | None = None) -> Path:
    meta = {"name": "fake", "inputs_sha256": sha or inputs_hash(SOURCES, ARGS), "sources": SOURCES, "args": ARGS,
            "load_before": {"loadavg_1m": 0.4, "cores": 2, "busy_share": busy}, "load_after": {"loadavg_1m": 1.1},
            "threads": {"cores": 1, "summary": "1 core for every side", "xla_probe": {"cpu_over_wall": 0.99}},
            "command": "fake.py --quick", "date_utc": "2026-12-02 05:00"}
    tables = [table("main", "A fake table", ["impl", "items/s", "ratio"], [["ours", 1234.5, "**9.9×**"],
                                                                          ["theirs", 124.0, "1.0×"]],
                    note="A note | with a pipe."),
              table("second", "", ["a"], [["x"]])]
    return write_result("fake", {"meta": meta, "tables": tables}, out=results / "fake.json")


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    md = tmp_path / "RESULTS.md"
    md.write_text(MD)
    results = tmp_path / "results"
    fake_result(results)
    return md, results


def run(md: Path, results: Path, *extra: str) -> int:
    return render.main(["--md", str(md), "--results", str(results), *extra])


def test_render_regenerates_blocks_with_provenance(tree, capsys):
    md, results = tree
    assert run(md, results) == 0
    text = md.read_text()
    assert text.startswith(PROSE_TOP) and "Between the tables." in text
    assert "old text" not in text
    block = text.split("<!-- table:fake/main -->\n")[1].split("<!-- /table -->")[0]
    lines = block.splitlines()
    assert lines[0] == "*A fake table*"
    assert "| impl | items/s | ratio |" in lines and "|---|---|---|" in lines
    assert "| ours | 1,234 | **9.9×** |" in lines
    assert "A note | with a pipe." in lines  # a note is prose: not escaped
    prov = lines[-1]
    for part in ("source `", "fake.json`", f"inputs sha256 `{inputs_hash(SOURCES, ARGS)[:12]}`", "loadavg 0.4",
                 "2 % of 2 cores busy", "1 core for every side", "XLA probe CPU/wall 0.99", "2026-12-02 05:00 UTC",
                 "`fake.py --quick`"):
        assert part in prov, part
    assert "under load" not in prov
    # the block of a result that does not exist yet is left alone, with a warning
    assert "<!-- table:absent/x -->\n<!-- /table -->" in text
    assert "absent.json does not exist" in capsys.readouterr().out
    # rendering is idempotent and the check passes
    assert run(md, results) == 0 and md.read_text() == text
    assert run(md, results, "--check") == 0


def test_check_detects_hand_edit(tree, capsys):
    md, results = tree
    run(md, results)
    edited = md.read_text().replace("| ours | 1,234 |", "| ours | 2,000 |")
    md.write_text(edited)
    capsys.readouterr()
    assert run(md, results, "--check") == 1
    out = capsys.readouterr().out
    assert "EDITED: block table:fake/main" in out and "fake/second" not in out
    assert md.read_text() == edited  # --check changes nothing
    assert run(md, results) == 0 and "| ours | 1,234 |" in md.read_text()


def test_check_detects_stale_inputs(tree, capsys):
    md, results = tree
    run(md, results)
    fake_result(results, sha="0" * 64)  # the hash the run recorded no longer matches the sources
    run(md, results)  # renders, but warns
    assert "STALE: fake.json" in capsys.readouterr().out
    assert run(md, results, "--check") == 1
    out = capsys.readouterr().out
    assert "STALE: fake.json: inputs hash 000000000000 at run time" in out
    # a recorded source that is gone is stale too
    data = json.loads((results / "fake.json").read_text())
    data["meta"]["sources"] = ["benchmarks/no_such_file.py"]
    (results / "fake.json").write_text(json.dumps(data))
    assert run(md, results, "--check") == 1
    assert "no longer exist: benchmarks/no_such_file.py" in capsys.readouterr().out


def test_unknown_table_and_load_marker(tree, capsys):
    md, results = tree
    md.write_text(md.read_text() + "\n<!-- table:fake/nope -->\n<!-- /table -->\n")
    assert run(md, results, "--check") == 1
    assert "fake.json has no table 'nope' (it has: main, second)" in capsys.readouterr().out
    md.write_text(MD)
    fake_result(results, busy=0.6)
    assert run(md, results) == 0
    assert "— **under load**" in md.read_text()


def test_bad_result_json_is_named(tree, capsys):
    md, results = tree
    (results / "fake.json").write_text(json.dumps({"tables": []}))
    assert run(md, results, "--check") == 2
    assert "needs 'meta' and 'tables'" in capsys.readouterr().out
    assert run(md, results) == 2  # the broken result's blocks are left alone, the rest is rendered
    assert "old text" in md.read_text()


def test_thread_settings_validate_and_single_thread_xla_applies():
    from benchmarks import _bench

    avail = len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="--cores must be between 1"):
        _bench.setup_threads(avail + 1)
    with pytest.raises(ValueError, match="--xla-threads must be between 1 and --cores"):
        _bench.setup_threads(1, xla_threads=2)
    # fresh interpreters: --cores 1 binds the process (every pool, XLA's included) to one core; on more
    # cores --xla-threads 1 sets the XLA flag that makes its compute single-threaded (XLA's runtime
    # still spins a second thread, so CPU/wall is no proof there: the benchmarks record it anyway)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}

    def fresh(code: str) -> list:
        out = subprocess.run([sys.executable, "-c", "import json; from benchmarks._bench import setup_threads, "
                              "xla_probe; " + code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    ratio = fresh("t = setup_threads(1); print(json.dumps(xla_probe(t, size=256, steps=30, calls=3)['cpu_over_wall']))")
    assert ratio < 1.35, f"XLA used more than one core with --cores 1: CPU/wall {ratio}"
    if avail > 1:
        flags = fresh(f"print(json.dumps(setup_threads({avail}, xla_threads=1)['XLA_FLAGS']))")
        assert flags == "--xla_cpu_multi_thread_eigen=false"
