"""The persistent compilation cache setting (:mod:`cfjax.infra.compile_cache`): where it resolves, that
workers inherit it through the environment, and that a bad folder turns it off with one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cfjax.infra.compile_cache import ENV, MIN_COMPILE_TIME_S, default_dir, describe, enable, resolve


def test_resolution_order_flag_then_cfjax_env_then_jax_env_then_default():
    assert default_dir({}) == Path.home() / ".cache" / "cfjax" / "jax" == resolve(None, {})
    assert resolve(None, {"XDG_CACHE_HOME": "/x"}) == Path("/x/cfjax/jax")
    assert resolve(None, {"CFJAX_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c/jax")
    assert resolve(None, {"JAX_COMPILATION_CACHE_DIR": "/j", "XDG_CACHE_HOME": "/x"}) == Path("/j")
    assert resolve(None, {ENV: "/mine", "JAX_COMPILATION_CACHE_DIR": "/j"}) == Path("/mine")
    assert resolve("/flag", {ENV: "/mine"}) == Path("/flag")
    for off in ("off", "OFF", "0", "no", "false", "none"):
        assert resolve(off, {}) is None
        assert resolve(None, {ENV: off, "JAX_COMPILATION_CACHE_DIR": "/j"}) is None


def test_enable_writes_the_environment_workers_inherit(tmp_path):
    env: dict[str, str] = {}
    path = enable(str(tmp_path / "c"), environ=env)
    assert path == tmp_path / "c" and path.is_dir()
    assert env == {ENV: str(path), "JAX_COMPILATION_CACHE_DIR": str(path),
                   "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": repr(MIN_COMPILE_TIME_S)}
    # a spawned worker reads JAX's own variables when it imports JAX
    out = subprocess.run([sys.executable, "-c", "import jax, json; print(json.dumps([jax.config.jax_compilation_cache_dir,"
                          " jax.config.jax_persistent_cache_min_compile_time_secs]))"],
                         env={**env, "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [str(path), MIN_COMPILE_TIME_S]
    # off removes JAX's variable too, so a worker does not pick up a folder from the parent's environment
    assert enable("off", environ=env) is None
    assert env[ENV] == "off" and "JAX_COMPILATION_CACHE_DIR" not in env


def test_a_folder_that_cannot_be_made_turns_the_cache_off_with_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    said: list[str] = []
    env: dict[str, str] = {}
    assert enable(str(blocker / "cache"), environ=env, warn=said.append) is None
    assert len(said) == 1 and "compilation cache off" in said[0] and "\n" not in said[0]
    assert env[ENV] == "off"
    assert blocker.read_text() == "not a folder"


def test_describe_counts_entries(tmp_path):
    assert "off" in describe(None)
    (tmp_path / "a").write_bytes(b"x" * 1024)
    line = describe(tmp_path)
    assert str(tmp_path) in line and "1 file(s)" in line
