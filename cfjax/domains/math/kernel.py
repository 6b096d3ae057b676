"""Whether Coq's kernel is here (``cfjax doctor``; ``--suite all`` skips the math suite without it)."""

from __future__ import annotations

__all__ = ["system_check"]


def system_check() -> tuple[bool, str]:
    """``(usable, one line)``: the Coq version and paths, or how to install it."""
    from cfjax.domains.math.coq import INSTALL_HINT, coq_info

    info = coq_info()
    if info is None:
        return False, INSTALL_HINT
    return True, f"Coq {info['version']} kernel ({info['coqtop']}, standard library {info['stdlib']})"
