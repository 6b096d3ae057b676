"""Which packages ship (everything else is in pyproject.toml).

Found, not listed: a new folder under ``cfjax/`` (a domain, a memory system) ships in the wheel
without an edit. ``kernels/`` lives at the top of the repository but ships as ``cfjax.kernels``: no
top-level ``kernels`` package is ever installed (it would shadow the Hugging Face ``kernels`` package
that transformers probes for). ``[tool.setuptools.packages.find]`` cannot express that mapping
beside a search, hence this file.
"""

from setuptools import find_packages, setup

KERNELS = ["cfjax.kernels" + p[len("kernels"):] for p in find_packages(include=["kernels", "kernels.*"])]

setup(
    packages=find_packages(include=["cfjax", "cfjax.*"]) + KERNELS,
    package_dir={"cfjax": "cfjax", "cfjax.kernels": "kernels"},
)
