"""JAX's persistent compilation cache, on by default for the ``cfjax`` command (issue 23, item 4).

XLA compiles dominate short jobs: every spawned worker of a run, every notebook kernel and every
new ``cfjax`` process compiles the selector trainer, the beam search and the acquisition programs
again. JAX can keep compiled executables on disk, keyed by the program, its shapes and dtypes, the
backend, the jaxlib version and the compile options (``jax.experimental.compilation_cache``), so a
second process on the same machine loads them instead. A cache hit loads the very executable a
compile would produce: results are bit-identical with the cache on, off, cold or warm.

Where (:func:`resolve`): ``--compile-cache DIR|off`` on the command line, else the environment
variable ``CFJAX_COMPILE_CACHE`` (a folder, or ``off``), else JAX's own ``JAX_COMPILATION_CACHE_DIR``
when the user set it, else ``$CFJAX_CACHE_DIR/jax``, else ``$XDG_CACHE_HOME/cfjax/jax`` (``~/.cache/cfjax/jax``). :func:`enable`
writes the choice into the environment (``CFJAX_COMPILE_CACHE``, ``JAX_COMPILATION_CACHE_DIR`` and
``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``), meant for spawned and local Ray workers, which read
JAX's variables when they import JAX (a plain subprocess does, tested; ``upliftmem run`` used to
point its workers at a scratch folder instead, now only when the cache is off); and into ``jax.config`` when JAX is already
imported in this process (it takes effect if nothing has been compiled yet).

Only programs whose compile took at least ``min_compile_time_s`` are written (JAX's own default is
1 s, which skips most of ours; ours is :data:`MIN_COMPILE_TIME_S`, chosen by
``benchmarks/compile_cache.py``: below it a disk read costs about what the compile does). A folder
that cannot be created or written turns the cache off with one warning line; nothing fails.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

__all__ = ["ENV", "MIN_COMPILE_TIME_S", "default_dir", "resolve", "enable", "describe"]

#: the environment variable that names the cache folder, or ``off``
ENV = "CFJAX_COMPILE_CACHE"
#: programs that compiled faster than this are not written to the cache (seconds)
MIN_COMPILE_TIME_S = 0.05
_OFF = ("off", "0", "no", "false", "none")


def default_dir(environ: MutableMapping[str, str] | None = None) -> Path:
    """``$CFJAX_CACHE_DIR/jax`` (the folder of cfjax's caches, beside the LLM response cache), else
    ``$XDG_CACHE_HOME/cfjax/jax``, else ``~/.cache/cfjax/jax``."""
    env = os.environ if environ is None else environ
    if env.get("CFJAX_CACHE_DIR"):
        return Path(env["CFJAX_CACHE_DIR"]).expanduser() / "jax"
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "cfjax" / "jax"


def resolve(setting: str | None = None, environ: MutableMapping[str, str] | None = None) -> Path | None:
    """The cache folder for ``setting`` (a folder, ``off``, or ``None`` for the environment's choice,
    module docstring); ``None`` when the cache is off."""
    env = os.environ if environ is None else environ
    if setting is None:
        setting = env.get(ENV)
        if setting is None and env.get("JAX_COMPILATION_CACHE_DIR"):
            setting = env["JAX_COMPILATION_CACHE_DIR"]
    if setting is not None and setting.strip().lower() in _OFF:
        return None
    if not setting:
        return default_dir(env)
    return Path(setting).expanduser()


def enable(setting: str | None = None, *, min_compile_time_s: float = MIN_COMPILE_TIME_S,
           environ: MutableMapping[str, str] | None = None, warn=None) -> Path | None:
    """Turn the persistent cache on (or off) for this process and the workers it starts; returns the
    folder, or ``None`` when it is off (by choice, or because the folder is not writable: ``warn``,
    default stderr, gets one line)."""
    env = os.environ if environ is None else environ
    path = resolve(setting, env)
    if path is not None:
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not os.access(path, os.W_OK | os.X_OK):
                raise PermissionError(f"{path} is not writable")
        except OSError as e:
            (warn or (lambda s: print(s, file=sys.stderr)))(
                f"cfjax: warning: compilation cache off ({e}); set {ENV}=DIR or --compile-cache DIR")
            path = None
    if path is None:
        env[ENV] = "off"
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
    else:
        env[ENV] = str(path)
        env["JAX_COMPILATION_CACHE_DIR"] = str(path)
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = repr(float(min_compile_time_s))
    if "jax" in sys.modules and env is os.environ:
        import jax

        jax.config.update("jax_compilation_cache_dir", None if path is None else str(path))
        if path is not None:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
    return path


def describe(path: Path | None) -> str:
    """One line for ``cfjax doctor``: the folder, its entries and size, or that the cache is off."""
    if path is None:
        return f"JAX compilation cache: off ({ENV}=off or --compile-cache off)"
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []
    size = sum(p.stat().st_size for p in files)
    return (f"JAX compilation cache: {path} ({len(files)} file(s), {size / 2**20:.1f} MiB; "
            f"off with {ENV}=off or --compile-cache off)")
