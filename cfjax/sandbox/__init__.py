"""OS-level isolation for untrusted, model-written code (the parent side).

A model's action may be hostile. The Python world model
(:mod:`cfjax.domains.python.world`) runs each candidate in a fresh interpreter
that, before any candidate code, enters the layers of
:mod:`cfjax.sandbox._layers` — namespaces (mount, network, PID, IPC, UTS, user),
a private read-only root, a non-root uid, ``no_new_privs``, Landlock and a
seccomp filter — then sets resource limits and installs the in-process audit
hook (the second layer). This module holds what the parent needs:

* :func:`seccomp_program` — the filter, compiled once per process with
  **pyseccomp** (a maintained ctypes binding of libseccomp). libseccomp knows
  each architecture's system-call numbers and rejects foreign ABIs (x32,
  i386 on x86_64) — the error-prone part of a hand-written BPF program. The
  program is exported as bytes and loaded by the child with
  ``prctl(PR_SET_SECCOMP)``, so the child needs neither libseccomp nor
  site-packages.
* Landlock is applied with direct system calls (``_layers.py``): the
  ``landlock`` package on PyPI (1.0.0.dev5) covers file-system rights only,
  not the TCP rights (ABI 4) or the signal / abstract-socket scoping (ABI 6)
  this sandbox relies on.
* Namespaces and the private root use ``unshare``/``mount``/``pivot_root``
  directly (what ``bwrap`` does); no setuid helper is needed, and nothing is
  installed outside the Python environment.
* :func:`probe` — which layers a sandboxed child actually gets on this machine
  (``cfjax doctor`` prints it), and :func:`require_strong` — the refusal to run
  a real model's code when a layer is missing, unless the user says
  ``--allow-weak-sandbox``.
* :func:`launch_argv` — the **launcher** for a program that is not Python (the
  Coq checker's ``coqtop``/``coqc``, :mod:`cfjax.domains.math.coq`): a small
  stdlib-only Python child enters the same layers, sets the resource limits
  and then ``execve``-s the program, which inherits every layer (namespaces,
  the private root and scratch tmpfs, the uid, ``no_new_privs``, the Landlock
  domain and the seccomp filter survive ``execve``: ``prctl(2)``
  ``PR_SET_NO_NEW_PRIVS``, ``landlock(7)``, ``seccomp(2)``). Its seccomp
  program is :func:`seccomp_program` ``(allow_exec=True)``: the same filter
  with ``execve`` allowed (``execveat``, ``fork``, ``vfork``, non-thread
  ``clone`` are still refused); Landlock grants the execute right only on the
  program and its ELF interpreter, so the most a compromised program can do is
  re-execute itself inside the sandbox. Its Landlock read rules are the
  caller's list (e.g. Coq's and OCaml's directories and the few libraries the
  binary links), not the Python world's ``/usr``.
* the **scratch bound**: the work directory of every sandboxed child is a
  private tmpfs (:data:`SCRATCH_MB` MB, :data:`SCRATCH_FILES` inodes by
  default, ``spec["scratch_mb"]``/``spec["scratch_files"]``), so a candidate
  that writes many files fails with ``ENOSPC`` inside its sandbox, and neither
  the host's disk nor a parallel evaluation notices (see ``_layers.py``).

What is and is not defended is written in README.md ("Running generated code").
"""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cfjax.infra.io import UserError
from cfjax.sandbox._layers import LAYERS, SCRATCH_FILES, SCRATCH_MB  # every layer a sandboxed child reports

__all__ = ["LAYERS", "LAYERS_PATH", "DENIED_SYSCALLS", "seccomp_program", "probe", "missing", "describe",
           "WeakSandboxError", "require_strong", "SCRATCH_MB", "SCRATCH_FILES", "SANDBOX_UID", "launch_argv",
           "parse_launch_report", "elf_interpreter"]

#: the uid a sandboxed child runs as when the parent is root (*nobody*)
SANDBOX_UID = 65534

LAYERS_PATH = Path(__file__).with_name("_layers.py")


#: system calls the filter refuses with ``EPERM`` (names unknown on an architecture are skipped);
#: ``clone`` is refused unless it creates a thread, ``clone3`` answers ``ENOSYS`` (so a C library
#: falls back on ``clone``, whose flags the filter can read)
DENIED_SYSCALLS = (
    # process creation and program execution
    "fork", "vfork", "execve", "execveat",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "kcmp",
    # the network and local sockets
    "socket", "socketpair",
    # namespaces, mounts and roots
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fsconfig", "fspick",
    "move_mount", "open_tree", "mount_setattr", "name_to_handle_at", "open_by_handle_at",
    # kernel attack surface an evaluator never needs
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "iopl", "ioperm",
    "mknod", "mknodat", "personality", "uselib", "lookup_dcookie", "vhangup",
)
_CLONE_THREAD = 0x00010000


@functools.lru_cache(maxsize=2)
def seccomp_program(allow_exec: bool = False) -> tuple[str, str]:
    """``(program as hex, '')``, or ``('', why)`` when no filter can be made here.

    ``allow_exec``: the launcher's variant — ``execve`` is allowed (the launcher must become the
    program); everything else of :data:`DENIED_SYSCALLS` stays refused, ``execveat`` included."""
    try:
        import pyseccomp as sc
    except Exception as e:  # ImportError, or RuntimeError("Unable to find libseccomp")
        return "", f"pyseccomp/libseccomp unavailable ({type(e).__name__}: {e})"
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        for name in DENIED_SYSCALLS:
            if allow_exec and name == "execve":
                continue
            try:
                f.add_rule(sc.ERRNO(errno.EPERM), name)
            except (OSError, ValueError, RuntimeError):
                continue  # not a system call on this architecture
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        with tempfile.TemporaryFile() as tmp:
            f.export_bpf(tmp)
            tmp.seek(0)
            program = tmp.read()
    except Exception as e:  # libseccomp refused: no filter rather than a crash
        return "", f"libseccomp could not build the filter ({type(e).__name__}: {e})"
    return program.hex(), ""


_PROBE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import _layers
spec = json.loads(sys.stdin.readline())
os.makedirs(os.path.join(spec["scratch"], "root"), exist_ok=True)
rep = _layers.enter(spec)
out = {"layers": rep, "uid": os.getuid()}
try:
    open("/etc/hostname").read()
    out["host_file"] = "readable"
except OSError as e:
    out["host_file"] = type(e).__name__
os.write(1, (json.dumps(out) + "\n").encode())
"""


def _probe_once(timeout_s: float, python: str | None) -> dict:
    program, why = seccomp_program()
    scratch = tempfile.mkdtemp(prefix="cfjax-probe-")
    try:
        work = os.path.join(scratch, "work")
        os.mkdir(work)
        os.mkdir(os.path.join(scratch, "root"))
        if os.geteuid() == 0:
            os.chown(work, 65534, 65534)
        spec = {"scratch": scratch, "rw": [work], "uid": 65534, "seccomp": program, "seccomp_why": why}
        try:
            res = subprocess.run([python or sys.executable, "-S", "-s", "-P", "-B", "-c", _PROBE, str(LAYERS_PATH.parent)],
                                 input=json.dumps(spec) + "\n", capture_output=True, text=True, timeout=timeout_s,
                                 cwd=work, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"layers": {k: f"off: the probe failed ({e})" for k in LAYERS}}
        try:
            return json.loads(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
            return {"layers": {k: f"off: the probe failed ({tail})" for k in LAYERS}}
    finally:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


@functools.lru_cache(maxsize=4)
def probe(python: str | None = None, timeout_s: float = 20.0) -> dict[str, str]:
    """``{layer: "on ..." | "off: <why>"}`` as a sandboxed child on this machine gets them (cached)."""
    return dict(_probe_once(timeout_s, python).get("layers", {}))


def missing(layers: dict[str, str]) -> tuple[str, ...]:
    """The layers of :data:`LAYERS` that are not on (``userns`` counts as on when ``uid`` is)."""
    return tuple(k for k in LAYERS if not str(layers.get(k, "off")).startswith("on"))


def describe(layers: dict[str, str] | None = None) -> str:
    """Human-readable table of the layers (``cfjax doctor``)."""
    layers = probe() if layers is None else layers
    width = max(len(k) for k in LAYERS)
    lines = [f"  {k:<{width}}  {layers.get(k, 'off: unknown')}" for k in LAYERS]
    lines.append(f"  {'rlimits':<{width}}  on (address space, CPU seconds, file size, open files, processes, core)")
    lines.append(f"  {'scratch':<{width}}  private tmpfs work directory ({SCRATCH_MB} MB, {SCRATCH_FILES} files by "
                 "default) when the mount layer is on")
    lines.append(f"  {'audit_hook':<{width}}  on (second layer: CPython audit events, in-process)")
    return "\n".join(lines)


#: the launcher (stdlib only; run as ``python -S -s -P -B -c _LAUNCH <layers dir> <spec JSON>``).
#: Every module it needs is imported *before* the layers (Landlock may then forbid reading the
#: standard library). It writes one line ``<nonce> <layers JSON>`` (or ``<nonce> failed <why JSON>``)
#: to fd 1 and becomes the program.
_LAUNCH = r"""
import json, os, resource, sys
sys.path.insert(0, sys.argv[1])
import _layers
del sys.path[0]
spec = json.loads(sys.argv[2])
nonce = spec["nonce"]
try:
    layers = _layers.enter(spec["sandbox"]) if spec.get("sandbox") else {}
    sys.modules.pop("_layers", None)
    os.chdir(spec["cwd"])
    for name, value in spec["limits"]:
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            resource.setrlimit(which, (value, value + 1) if name == "RLIMIT_CPU" else (value, value))
        except (ValueError, OSError):
            pass
    os.write(1, (nonce + " " + json.dumps(layers) + "\n").encode())
    os.execve(spec["argv"][0], spec["argv"], spec["env"])
except BaseException as e:
    try:
        os.write(1, (nonce + " failed " + json.dumps(type(e).__name__ + ": " + str(e)) + "\n").encode())
    finally:
        os._exit(127)
"""


def elf_interpreter(path: str) -> str | None:
    """The ELF interpreter (``PT_INTERP``, e.g. ``/lib64/ld-linux-x86-64.so.2``) of an executable,
    resolved; None for a static or non-ELF file. The kernel opens it for execution too, so Landlock
    must grant it the execute right."""
    import struct

    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF":
                return None
            cls, data = head[4], head[5]
            end = "<" if data == 1 else ">"
            if cls == 2:
                phoff, = struct.unpack_from(end + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
            else:
                phoff, = struct.unpack_from(end + "I", head, 28)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
            for k in range(min(phnum, 64)):
                f.seek(phoff + k * phentsize)
                ph = f.read(phentsize)
                if struct.unpack_from(end + "I", ph, 0)[0] != 3:  # PT_INTERP
                    continue
                if cls == 2:
                    off, = struct.unpack_from(end + "Q", ph, 8)
                    size, = struct.unpack_from(end + "Q", ph, 32)
                else:
                    off, = struct.unpack_from(end + "I", ph, 4)
                    size, = struct.unpack_from(end + "I", ph, 16)
                f.seek(off)
                name = f.read(min(size, 4096)).split(b"\0", 1)[0].decode("utf-8", "replace")
                return os.path.realpath(name) if name else None
    except (OSError, struct.error):
        return None
    return None


def launch_argv(program: list[str], *, cwd: str, scratch: str, env: dict[str, str], read: list[str],
                listing: list[str] = (), execute: list[str] = (), limits: dict[str, int] | None = None, nonce: str,
                isolation: bool = True, scratch_mb: float = SCRATCH_MB, scratch_files: int = SCRATCH_FILES,
                uid: int = SANDBOX_UID, python: str | None = None) -> list[str]:
    """The command line that runs ``program`` (absolute path first) under the OS layers.

    ``scratch`` must hold an empty ``root`` directory (the private root's mount point) and ``cwd``
    (the work directory, whose contents are copied into the private tmpfs); when the parent is root,
    ``cwd`` should belong to ``uid``. ``read``: the Landlock read rules (the program's own
    directories and libraries); ``listing``: directories that may only be listed; ``execute``: the
    program and its ELF interpreter (added when not given). ``limits``: ``{"RLIMIT_AS": bytes, "RLIMIT_CPU": s, ...}`` (soft = hard; the CPU limit's
    hard value is one second above, so ``SIGXCPU`` comes first). ``isolation=False``: resource limits
    only (no OS layer; a comparison or a machine without namespaces). Start it with
    ``start_new_session=True`` and read its first line of fd 1 with :func:`parse_launch_report`."""
    exe = os.path.realpath(program[0])
    if not execute:
        interp = elf_interpreter(exe)
        execute = [exe] + ([interp] if interp else [])
    sandbox = None
    if isolation:
        prog, why = seccomp_program(allow_exec=True)
        sandbox = {"scratch": scratch, "rw": [cwd], "uid": uid, "seccomp": prog, "seccomp_why": why,
                   "read": list(read) + list(execute), "list": list(listing), "execute": list(execute),
                   "detach_stdio": True,
                   "scratch_mb": scratch_mb, "scratch_files": scratch_files}
    spec = {"nonce": nonce, "sandbox": sandbox, "cwd": cwd, "argv": [exe] + list(program[1:]), "env": dict(env),
            "limits": sorted((limits or {}).items())}
    return [python or sys.executable, "-S", "-s", "-P", "-B", "-c", _LAUNCH, str(LAYERS_PATH.parent),
            json.dumps(spec)]


def parse_launch_report(line: str, nonce: str) -> dict[str, str] | str | None:
    """The launcher's first line: the layers it entered (a dict), the reason it could not start the
    program (a str), or None when ``line`` is not its report."""
    tag = nonce + " "
    if not line.startswith(tag):
        return None
    rest = line[len(tag):].strip()
    try:
        if rest.startswith("failed "):
            why = json.loads(rest[len("failed "):])
            return str(why)
        out = json.loads(rest)
    except ValueError:
        return None
    return {str(k): str(v) for k, v in out.items()} if isinstance(out, dict) else None


class WeakSandboxError(UserError):
    """A real model's code would run with an OS layer missing and the user did not allow it
    (a :class:`~cfjax.infra.io.UserError`: the CLI prints one line and exits with status 2)."""


def require_strong(allow_weak: bool, *, backbone: str) -> dict[str, str]:
    """Refuse to run a non-scripted backbone's code without every layer, unless ``allow_weak``.

    The scripted backbone only writes edits of the suite's own code, so it is exempt. Returns the
    probed layers."""
    layers = probe()
    gone = missing(layers)
    if backbone != "scripted" and gone and not allow_weak:
        detail = "; ".join(f"{k}: {layers.get(k, 'off')}" for k in gone)
        raise WeakSandboxError(
            f"the sandbox for generated code lacks {', '.join(gone)} on this machine ({detail}); "
            "run `cfjax doctor` for details, or pass --allow-weak-sandbox to run anyway")
    return layers
