"""The checkout's ``kernels/`` folder must not shadow Hugging Face's ``kernels`` distribution.

transformers >= 5 depends on the hub-kernels package named ``kernels`` and imports it while it
loads its models; from a checkout's root (``python -m pytest``) the working directory comes first on
``sys.path`` and used to hand it our folder (CI: ``cannot import name 'CUDAProperties' from
'kernels'``). :mod:`cfjax.infra._shadow` resolves the name past the folder.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_cfjax_kernels_is_the_checkout_folder_and_top_level_kernels_is_the_distribution():
    try:
        dist = importlib.metadata.distribution("kernels")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the hub-kernels distribution is not installed (transformers < 5); nothing to shadow")
    ours, theirs = _run("import cfjax, cfjax.kernels as k, kernels; print(k.__file__); print(kernels.__file__)").splitlines()
    assert Path(ours).resolve().parent == (ROOT / "kernels").resolve()
    assert Path(theirs).resolve().is_relative_to(Path(dist.locate_file("")).resolve())
    assert Path(theirs).resolve().parent != (ROOT / "kernels").resolve()


def test_the_guard_changes_nothing_for_other_names_and_is_installed_once():
    out = _run("import sys, cfjax, importlib; importlib.reload(cfjax); "
               "from cfjax.infra._shadow import HubKernelsFinder as F; "
               "print(sum(isinstance(f, F) for f in sys.meta_path)); "
               "print(F().find_spec('json'), F().find_spec('kernels.dqn', ['x']))")
    assert out.splitlines() == ["1", "None None"]
