"""`cfjax doctor` and the refusal to run a real model's code without every sandbox layer."""

from __future__ import annotations

import pytest

import cfjax.sandbox as sandbox
from cfjax.cli import main


def _fake_probe(layers):
    def probe(python=None, timeout_s=20.0):
        return dict(layers)

    return probe


ALL_ON = {k: "on" for k in sandbox.LAYERS}


def test_doctor_lists_every_layer(capsys, monkeypatch):
    monkeypatch.setattr(sandbox, "probe", _fake_probe(ALL_ON))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for k in sandbox.LAYERS + ("rlimits", "audit_hook"):
        assert k in out
    assert "all layers on" in out


def test_doctor_names_a_missing_layer(capsys, monkeypatch):
    monkeypatch.setattr(sandbox, "probe", _fake_probe({**ALL_ON, "landlock": "off: the kernel has no Landlock"}))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "MISSING: landlock" in out and "the kernel has no Landlock" in out


def test_real_doctor_runs_here(capsys):
    rc = main(["doctor"])
    out = capsys.readouterr().out
    assert rc == (0 if not sandbox.missing(sandbox.probe()) else 1)
    assert "namespaces" in out


@pytest.mark.parametrize("method", ["countermem", "antipersist"])
def test_real_model_refused_without_every_layer(capsys, monkeypatch, tmp_path, method):
    monkeypatch.setattr(sandbox, "probe", _fake_probe({**ALL_ON, "seccomp": "off: no libseccomp"}))
    out = tmp_path / "run"
    rc = main([method, "run", "--suite", "pybugs", "--out", str(out), "--backbone", "openai"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "seccomp" in err[0] and "--allow-weak-sandbox" in err[0]
    assert not out.exists()


def test_weak_sandbox_allowed_explicitly_and_scripted_exempt(monkeypatch):
    import argparse

    from cfjax import cli

    monkeypatch.setattr(sandbox, "probe", _fake_probe({**ALL_ON, "seccomp": "off: no libseccomp"}))
    logged = []
    monkeypatch.setattr(cli, "_log", logged.append)
    cli._check_sandbox(argparse.Namespace(backbone="openai", allow_weak_sandbox=True), ["pybugs"])
    assert logged and "seccomp" in logged[0]
    cli._check_sandbox(argparse.Namespace(backbone="scripted", allow_weak_sandbox=False), ["pybugs"])
    cli._check_sandbox(argparse.Namespace(backbone="openai", allow_weak_sandbox=False), ["sql", "sat"])
    with pytest.raises(sandbox.WeakSandboxError):
        cli._check_sandbox(argparse.Namespace(backbone="openai", allow_weak_sandbox=False), ["sql", "pybugs"])


def test_doctor_reports_the_compilation_cache(capsys, monkeypatch, tmp_path):
    from cfjax.infra.compile_cache import ENV

    monkeypatch.setattr(sandbox, "probe", _fake_probe(ALL_ON))
    for k in (ENV, "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        monkeypatch.setenv(k, "off")  # restored by monkeypatch after the test: main() writes them
    cache = tmp_path / "cc"
    assert main(["--compile-cache", str(cache), "doctor"]) == 0
    out = capsys.readouterr().out
    assert f"JAX compilation cache: {cache} (0 file(s)" in out and cache.is_dir()
    assert main(["--compile-cache", "off", "doctor"]) == 0
    assert "JAX compilation cache: off" in capsys.readouterr().out
