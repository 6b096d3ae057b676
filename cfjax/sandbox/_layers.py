"""The OS-level layers of the sandbox, entered by the child process itself (stdlib only).

This file is loaded by path from a sandboxed script (``python -S -s -P -B``),
*before* any untrusted code, so it imports nothing outside the standard library
and keeps no state the untrusted code could use afterwards (``ctypes`` is
dropped from ``sys.modules`` when :func:`enter` returns). The parent-side API
(which layers exist here, the seccomp program, ``cfjax doctor``) is
:mod:`cfjax.sandbox`.

:func:`enter` applies, in this order, every layer the kernel allows and
reports each one as ``"on"`` or ``"off: <why>"``:

1. ``namespaces`` — ``unshare`` of a mount, network, PID, IPC and UTS
   namespace (plus a user namespace first when not root: that is what lets an
   ordinary user make the others). The network namespace has only a downed
   loopback, so nothing can be reached.
2. ``mount`` — a private minimal root: a small ``tmpfs`` holding read-only bind
   mounts of ``/usr`` (and the ``/lib*``, ``/bin``, ``/sbin`` links or
   directories), the interpreter's whole prefix (in a virtual environment that
   includes its site-packages, which only Landlock hides), ``/etc/ld.so.cache``
   and ``/dev/{null,zero,random,urandom}``, plus the scratch (work) directory
   read-write; ``pivot_root`` into it, the old root detached, the tmpfs
   remounted read-only. Nothing else of the host (``/root`` but the
   interpreter, ``/home``, ``/proc``, ``/etc``, the project tree, the suite's
   test files) exists inside. The work directory is not the host's: it is a
   private ``tmpfs`` of at most ``scratch_mb`` MB and ``scratch_files``
   inodes (defaults :data:`SCRATCH_MB`, :data:`SCRATCH_FILES`; ``mount(2)``,
   ``tmpfs(5)``: ``size=``, ``nr_inodes=``), mounted ``nosuid,nodev,noexec``
   and filled with a copy of what the parent put in the host directory. A
   write past either bound fails inside the sandbox with ``ENOSPC``; nothing
   the untrusted code writes reaches the host's disk, and the tmpfs is freed
   with the mount namespace when the sandbox's last process exits.
3. ``pidns`` — two forks: the first child is PID 1 (init) of the new PID
   namespace and only waits; the untrusted code runs as PID 2 (init would
   ignore default-action signals such as the CPU limit's ``SIGXCPU``). When
   init exits, the kernel kills everything left in the namespace; nothing
   outside is visible. The process outside only waits and passes the exit
   status (or signal) on. ``PR_SET_PDEATHSIG`` kills each child if orphaned.
4. ``uid`` — as root: ``setgroups([])``, ``setresgid``/``setresuid`` to
   ``uid`` (65534, *nobody*), so ``RLIMIT_NPROC`` and file permissions apply;
   then ``userns``: a user namespace mapping only that uid. Capabilities are
   cleared (``capset``) and the process made non-dumpable.
5. ``no_new_privs`` — ``prctl(PR_SET_NO_NEW_PRIVS)``.
6. ``landlock`` — a Landlock domain (ABI 1–7, what the kernel has): read-only
   access to ``/usr`` except its Python package directories, ``/usr/local``
   and ``/usr/src``; to the standard library entry by entry (not its
   ``site-packages``, unless asked); to the loader cache and the devices
   (``/dev/null`` also for writing); execute only the interpreter binary;
   full access only to the scratch directory (a spec may replace the read
   rules by its own list, ``read``, and name other executables, ``execute``
   — the launcher of :mod:`cfjax.sandbox` does, for Coq); no TCP bind or connect
   (ABI ≥ 4); no signals and no abstract UNIX sockets leaving the domain
   (ABI ≥ 6).
7. ``seccomp`` — a BPF filter made by the parent (:mod:`cfjax.sandbox`, with
   libseccomp) refusing process creation (``fork``, ``vfork``, non-thread
   ``clone``, ``clone3``), ``execve``/``execveat``, ``ptrace``, sockets,
   ``pidfd_*``, mounting and namespace calls, ``bpf``, ``io_uring``, kernel
   keyrings and module loading. (The launcher's variant allows ``execve``
   only, so that it can become the sandboxed program; Landlock then limits
   what can be executed to that program and its ELF interpreter.)

Resource limits and the audit hook are applied by the script afterwards.
"""

import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 4, 22, 38
SECCOMP_MODE_FILTER = 2

# syscall numbers not wrapped by glibc (Landlock's are the same on every architecture)
_SYS = {"x86_64": {"pivot_root": 155, "capset": 126}, "aarch64": {"pivot_root": 41, "capset": 91}}
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock file-system rights by the ABI that introduced them
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

#: default bounds of the private scratch tmpfs (``spec["scratch_mb"]``, ``spec["scratch_files"]``)
SCRATCH_MB = 64
SCRATCH_FILES = 4096

#: every layer :func:`enter` reports, in order
LAYERS = ("namespaces", "mount", "pidns", "uid", "userns", "no_new_privs", "landlock", "seccomp")


def _fs_rights(abi):
    rights = FS_ABI1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


class _Sys:
    """ctypes access to the few system calls the standard library does not wrap."""

    def __init__(self):
        import ctypes

        self.ct = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.nr = _SYS.get(os.uname().machine, {})

    def check(self, res, what):
        if res == -1 or (isinstance(res, int) and res < 0):
            e = self.ct.get_errno()
            raise OSError(e, what + ": " + os.strerror(e))
        return res

    def unshare(self, flags):
        self.check(self.libc.unshare(self.ct.c_int(flags)), "unshare")

    def mount(self, src, target, fstype, flags, data=None):
        enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
        self.check(self.libc.mount(enc(src), enc(target), enc(fstype), self.ct.c_ulong(flags), enc(data)),
                   "mount " + str(target))

    def umount2(self, target, flags):
        self.check(self.libc.umount2(os.fsencode(target), self.ct.c_int(flags)), "umount2")

    def pivot_root(self, new, old):
        if "pivot_root" not in self.nr:
            raise OSError(38, "pivot_root: unknown syscall number on this architecture")
        self.check(self.libc.syscall(self.ct.c_long(self.nr["pivot_root"]), os.fsencode(new), os.fsencode(old)),
                   "pivot_root")

    def prctl(self, option, arg2=0, arg3=0):
        ul = self.ct.c_ulong
        self.check(self.libc.prctl(self.ct.c_int(option), ul(arg2), ul(arg3), ul(0), ul(0)), "prctl")

    def clear_caps(self):
        if "capset" not in self.nr:
            raise OSError(38, "capset: unknown syscall number on this architecture")
        ct = self.ct

        class Header(ct.Structure):
            _fields_ = [("version", ct.c_uint32), ("pid", ct.c_int)]

        class Data(ct.Structure):
            _fields_ = [("effective", ct.c_uint32), ("permitted", ct.c_uint32), ("inheritable", ct.c_uint32)]

        hdr = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
        data = (Data * 2)()
        self.check(self.libc.syscall(ct.c_long(self.nr["capset"]), ct.byref(hdr), ct.byref(data)), "capset")

    # -------------------------------------------------------------- landlock
    def landlock_abi(self):
        res = self.libc.syscall(self.ct.c_long(SYS_LANDLOCK_CREATE_RULESET), None, self.ct.c_size_t(0),
                                self.ct.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
        return int(res) if res > 0 else 0

    def landlock(self, abi, read, execute, rw, listing=()):
        """Restrict this process to the given paths; return what was enforced.

        ``listing``: directories that may only be listed (a Landlock rule applies to everything
        beneath a directory, so the standard library's own directory gets ``READ_DIR`` and its
        entries — all but ``site-packages`` — ``READ_FILE``)."""
        ct = self.ct

        class Attr(ct.Structure):
            _fields_ = [("fs", ct.c_uint64), ("net", ct.c_uint64), ("scoped", ct.c_uint64)]

        class Beneath(ct.Structure):
            _pack_ = 1
            _fields_ = [("allowed", ct.c_uint64), ("fd", ct.c_int32)]

        fs = _fs_rights(abi)
        net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0
        scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0
        size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
        attr = Attr(fs, net, scoped)
        rs = self.check(self.libc.syscall(ct.c_long(SYS_LANDLOCK_CREATE_RULESET), ct.byref(attr),
                                          ct.c_size_t(size), ct.c_uint32(0)), "landlock_create_ruleset")
        try:
            # one rule object and pre-converted arguments: ~200 rules per child, so per-call
            # ctypes conversions matter
            rule = Beneath(0, -1)
            args = (ct.c_long(SYS_LANDLOCK_ADD_RULE), ct.c_int(rs), ct.c_int(LANDLOCK_RULE_PATH_BENEATH),
                    ct.byref(rule), ct.c_uint32(0))
            syscall, fstat, is_dir = self.libc.syscall, os.fstat, __import__("stat").S_ISDIR
            o_path = os.O_PATH | os.O_CLOEXEC

            def allow(path, rights):
                try:
                    fd = os.open(path, o_path)
                except OSError:
                    return  # not there: nothing to allow
                try:
                    if not is_dir(fstat(fd).st_mode):
                        rights &= _FILE_RIGHTS
                    rule.allowed = rights & fs
                    rule.fd = fd
                    if syscall(*args) < 0:
                        self.check(-1, "landlock_add_rule " + path)
                finally:
                    os.close(fd)

            for p in listing:
                allow(p, FS_READ_DIR)
            for p in read:
                allow(p, FS_READ_FILE | FS_READ_DIR)
            for p in execute:
                allow(p, FS_READ_FILE | FS_EXECUTE)
            for p in rw:
                allow(p, fs & ~FS_EXECUTE)
            allow("/dev/null", FS_READ_FILE | FS_WRITE_FILE)
            self.check(self.libc.syscall(ct.c_long(SYS_LANDLOCK_RESTRICT_SELF), ct.c_int(rs), ct.c_uint32(0)),
                       "landlock_restrict_self")
        finally:
            os.close(rs)
        what = ["filesystem"]
        if net:
            what.append("TCP")
        if scoped:
            what.append("signals and abstract sockets")
        return "on (ABI %d: %s)" % (abi, ", ".join(what))

    def seccomp(self, program):
        """Load a classic-BPF program (``struct sock_filter[]`` as bytes) with ``PR_SET_SECCOMP``."""
        ct = self.ct
        if not program or len(program) % 8:
            raise ValueError("the seccomp program must be a non-empty multiple of 8 bytes")

        class Prog(ct.Structure):
            _fields_ = [("len", ct.c_ushort), ("filter", ct.c_void_p)]

        buf = ct.create_string_buffer(program, len(program))
        prog = Prog(len(program) // 8, ct.cast(buf, ct.c_void_p))
        ul = ct.c_ulong
        self.check(self.libc.prctl(ct.c_int(PR_SET_SECCOMP), ul(SECCOMP_MODE_FILTER), ct.byref(prog), ul(0), ul(0)),
                   "seccomp")


def _locked_flags(path):
    """The mount flags of ``path``'s mount that a bind remount must keep (ro remounts inside a user
    namespace fail with EPERM when they would drop them)."""
    f = os.statvfs(path).f_flag
    out = 0
    for st, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                   (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if f & st:
            out |= ms
    return out


def _copy_into(src, dst, owner):
    """Copy the regular files and directories under ``src`` (what the parent wrote: small) into
    ``dst``; symbolic links and special files are skipped. ``owner``: ``(uid, gid)`` to give them,
    or None."""
    for entry in os.scandir(src):
        target = dst + "/" + entry.name
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(target, 0o700)
            _copy_into(entry.path, target, owner)
        elif entry.is_file(follow_symlinks=False):
            mode = entry.stat(follow_symlinks=False).st_mode & 0o777
            fi = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                fo = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode | 0o600)
                try:
                    while True:
                        chunk = os.read(fi, 1 << 20)
                        if not chunk:
                            break
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fo, view):]
                finally:
                    os.close(fo)
            finally:
                os.close(fi)
        else:
            continue
        if owner is not None:
            os.chown(target, owner[0], owner[1])


def _build_root(s, newroot, ro, rw, devices, scratch=None):
    """Mount a minimal root at ``newroot`` and pivot into it (paths keep their host names).

    ``scratch``: ``(bytes, inodes, uid, gid)`` — each ``rw`` directory becomes a private tmpfs of that
    size holding a copy of the host directory (owned by ``uid``/``gid``); None: bind-mount the host
    directory itself (unbounded)."""
    s.mount(None, "/", None, MS_REC | MS_PRIVATE)
    s.mount("tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")

    def inside(p):
        return newroot + p

    def mountpoint(p, is_dir):
        target = inside(p)
        os.makedirs(target if is_dir else os.path.dirname(target), mode=0o755, exist_ok=True)
        if not is_dir and not os.path.exists(target):
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        return target

    for top in ("/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"):
        if os.path.islink(top):
            os.symlink(os.readlink(top), inside(top))
        elif os.path.isdir(top) and top not in ro:
            ro = list(ro) + [top]
    for p in ro:
        if not os.path.exists(p):
            continue
        t = mountpoint(p, os.path.isdir(p))
        s.mount(p, t, None, MS_BIND | MS_REC)
        s.mount(None, t, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(p))
    for p in devices:
        if os.path.exists(p):
            t = mountpoint(p, False)
            s.mount(p, t, None, MS_BIND)
    for p in rw:
        t = mountpoint(p, True)
        if scratch is None:
            s.mount(p, t, None, MS_BIND)
            continue
        size, inodes, uid, gid = scratch
        s.mount("tmpfs", t, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d" % (size, inodes, uid, gid))
        _copy_into(p, t, (uid, gid) if os.geteuid() == 0 and uid != 0 else None)
    os.chdir(newroot)
    s.pivot_root(".", ".")
    s.umount2(".", MNT_DETACH)
    os.chdir("/")
    s.mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _detach_stdio():
    """Point fds 0-2 of a process that only waits (the relay, the namespace's init) at /dev/null,
    so that the untrusted process alone holds the parent's pipes (EOF means it has exited)."""
    try:
        fd = os.open("/dev/null", os.O_RDWR)
    except OSError:
        return
    for n in (0, 1, 2):
        if fd != n:
            try:
                os.dup2(fd, n)
            except OSError:
                pass
    if fd > 2:
        os.close(fd)


def _wait(pid):
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


def _relay(pid):
    """The process outside the PID namespace: wait for the namespace's init, then end the way the
    untrusted process did (``init`` reports a death by signal ``n`` as exit status ``128 + n``)."""
    status = _wait(pid)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    if code > 128:
        sig = code - 128
        try:
            import resource
            import signal

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if sig != signal.SIGKILL and sig != signal.SIGSTOP:
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
    os._exit(code)


def _init(pid):
    """PID 1 of the namespace: wait for the untrusted process (PID 2) and exit with its status.
    (The untrusted code is not init itself, because init ignores default-action signals such as
    the ``SIGXCPU`` of the CPU limit.) When init exits, the kernel kills everything left inside.

    Only a death by signal ``n`` becomes ``128 + n``; an exit status above 127 chosen by the
    untrusted code becomes 1, so it cannot pass for a signal (e.g. the CPU limit's)."""
    status = _wait(pid)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    os._exit(code if code < 128 else 1)


def _prefixes():
    out = []
    for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix):
        if p and os.path.realpath(p) not in out:
            out.append(os.path.realpath(p))
    return out


def stdlib_dirs():
    """The standard library's directories (``sysconfig``'s ``stdlib`` and ``platstdlib``)."""
    import sysconfig

    paths = sysconfig.get_paths()
    out = [os.path.realpath(paths["stdlib"])]
    if os.path.realpath(paths["platstdlib"]) not in out:
        out.append(os.path.realpath(paths["platstdlib"]))
    return out


def _grant_entries(d, skip, listing, read):
    """Record ``d`` as listable and every entry of it that ``skip`` does not name as readable
    (nothing when ``d`` cannot be listed)."""
    try:
        names = os.listdir(d)
    except OSError:
        return
    listing.append(d)
    read.extend(d + "/" + n for n in names if not skip(n))


def _stdlib_read_rules(allow_site, dirs=None):
    """Landlock read rules for the standard library: its directory may be listed, every entry but
    ``site-packages`` read (unless ``allow_site``). ``dirs`` (from the parent, which knows them
    already) saves importing ``sysconfig`` here."""
    listing, rules = [], []
    for d in (list(dirs) if dirs else stdlib_dirs()):
        _grant_entries(d, lambda n: not allow_site and n in ("site-packages", "dist-packages"), listing, rules)
    return listing, rules


_USR_SKIP = frozenset({"lib", "lib32", "lib64", "libx32", "local", "src"})


def _usr_read_rules():
    """Landlock rules for ``/usr`` without any Python package directory: ``/usr`` and its library
    directories may be listed; their entries are readable except ``local``, ``src`` (a checkout may
    live there) and every ``python*`` directory (a system Python's site- and dist-packages, where a
    non-editable install of this project would put the suite's gold code). A standard library
    under ``/usr`` is granted entry by entry by :func:`_stdlib_read_rules`."""
    listing, read = [], []
    _grant_entries("/usr", lambda n: n in _USR_SKIP, listing, read)
    for d in ("/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/local/lib"):
        if os.path.isdir(d) and not os.path.islink(d):
            _grant_entries(d, lambda n: n.startswith("python"), listing, read)
    if os.path.isdir("/usr/local"):
        listing.append("/usr/local")
    return listing, read


def _world_traversable(path):
    """Whether every directory above ``path`` may be searched by any user."""
    p = os.path.realpath(path)
    while True:
        try:
            if not os.stat(p).st_mode & 0o001:
                return False
        except OSError:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


def enter(spec):
    """Apply every OS layer that is available; return ``{layer: "on ..." | "off: <why>"}``.

    ``spec`` (plain data from the parent):
      ``scratch``   directory for the new root's mount point (``<scratch>/root`` must exist, empty);
      ``rw``        directories the untrusted code may read and write (the work directory);
      ``uid``       the uid to run as when started as root (65534);
      ``seccomp``   the filter program as a hex string ('' = none);
      ``allow_site``  whether site-packages may be read (the pytest cross-check runner);
      ``layers``    the layers to try (default: all);
      ``stdlib``    the standard library's directories (default: from ``sysconfig``);
      ``scratch_mb``, ``scratch_files``  the bounds of each ``rw`` directory's private tmpfs
                    (defaults :data:`SCRATCH_MB`, :data:`SCRATCH_FILES`; ``scratch_mb=0``: the host
                    directory itself, unbounded — the behaviour before the bound existed);
      ``read``      Landlock: the paths that may be read, *instead of* the default rules (``/usr``
                    but its Python package directories, the standard library) — for a program that
                    is not Python (the launcher's ``execve``); the loader cache and the devices are
                    always added;
      ``list``      with ``read``: directories that may only be listed (names, not contents);
      ``execute``   Landlock: further files that may be executed (a program and its ELF interpreter);
      ``detach_stdio``  the relay and the namespace's init drop their copies of fds 0-2.
    """
    want = set(spec.get("layers") or LAYERS)
    rep = {name: "off: not requested" for name in LAYERS}
    s = _Sys()
    euid = os.geteuid()
    uid = int(spec.get("uid", 65534))
    rw = [os.path.realpath(p) for p in spec.get("rw", ())]
    allow_site = bool(spec.get("allow_site"))
    prefixes = _prefixes()
    exe = os.path.realpath(sys.executable)
    scratch_mb = float(spec.get("scratch_mb", SCRATCH_MB))
    scratch_files = int(spec.get("scratch_files", SCRATCH_FILES))
    if euid == 0 and "uid" in want:
        owner = (uid, uid)
    else:
        owner = (euid, os.getegid())
    scratch = (int(scratch_mb * 1024 * 1024), scratch_files) + owner if scratch_mb > 0 else None

    # 1-3: namespaces, a minimal root, PID 1 of a new PID namespace
    ns_ok = False
    if "namespaces" in want:
        flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
        try:
            if euid != 0:
                gid = os.getegid()
                s.unshare(flags | CLONE_NEWUSER)
                for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (euid, euid)),
                                   ("gid_map", "%d %d 1" % (gid, gid))):
                    with open("/proc/self/" + name, "w") as f:
                        f.write(text)
                rep["userns"] = "on (uid %d mapped to itself)" % euid
            else:
                s.unshare(flags)
            ns_ok = True
            rep["namespaces"] = "on (mount, network, PID, IPC, UTS)"
        except OSError as e:
            rep["namespaces"] = "off: " + str(e)
    if ns_ok and "mount" in want:
        ro = ["/usr", "/etc/ld.so.cache"] + prefixes
        if os.path.dirname(exe) and not any(exe.startswith(p + "/") for p in ["/usr"] + prefixes):
            ro.append(exe)
        devices = ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"]
        try:
            _build_root(s, os.path.join(spec["scratch"], "root"), ro, rw, devices, scratch)
            rep["mount"] = "on (private minimal root, read-only but for the scratch directory" + (
                ": a private %g MB, %d-file tmpfs)" % (scratch_mb, scratch_files) if scratch else ")")
        except OSError as e:
            rep["mount"] = "off: " + str(e)
    if ns_ok:
        detach = bool(spec.get("detach_stdio"))
        for parent_role in (_relay, _init):  # outside the namespace, then its PID 1
            pid = os.fork()
            if pid:
                if detach:
                    _detach_stdio()
                parent_role(pid)  # never returns
            try:
                s.prctl(PR_SET_PDEATHSIG, 9)
            except OSError:
                pass
        rep["pidns"] = "on (PID %d)" % os.getpid()
    elif "pidns" in want:
        rep["pidns"] = "off: no namespaces"

    # 4: a non-root uid, then a user namespace that maps only it
    if "uid" in want:
        if euid != 0:
            rep["uid"] = "on (not root: uid %d)" % euid
        elif not (rep["mount"].startswith("on") or all(_world_traversable(p) for p in prefixes)):
            rep["uid"] = "off: the interpreter is not reachable by uid %d without the private root" % uid
        else:
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                rep["uid"] = "on (uid %d)" % uid
            except OSError as e:
                rep["uid"] = "off: " + str(e)
    if euid == 0 and "userns" in want:
        try:
            s.unshare(CLONE_NEWUSER)
            me, gid = os.geteuid(), os.getegid()
            for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (me, me)),
                               ("gid_map", "%d %d 1" % (gid, gid))):
                try:
                    with open("/proc/self/" + name, "w") as f:
                        f.write(text)
                except OSError:
                    pass  # no /proc inside the private root: the namespace maps nobody (overflow ids)
            rep["userns"] = "on"
        except OSError as e:
            rep["userns"] = "off: " + str(e)
    try:
        s.clear_caps()
    except OSError:
        pass
    try:
        s.prctl(PR_SET_DUMPABLE, 0)
    except OSError:
        pass

    # 5-7
    if "no_new_privs" in want or "landlock" in want or "seccomp" in want:
        try:
            s.prctl(PR_SET_NO_NEW_PRIVS, 1)
            rep["no_new_privs"] = "on"
        except OSError as e:
            rep["no_new_privs"] = "off: " + str(e)
    if "landlock" in want:
        abi = s.landlock_abi()
        if abi <= 0:
            rep["landlock"] = "off: the kernel has no Landlock"
        else:
            devices_read = ["/etc/ld.so.cache", "/dev/zero", "/dev/random", "/dev/urandom"]
            if spec.get("read") is not None:
                listing = [os.path.realpath(p) for p in spec.get("list", ())]
                read = [os.path.realpath(p) for p in spec["read"]] + devices_read
            else:
                listing, std = _stdlib_read_rules(allow_site, spec.get("stdlib"))
                usr_listing, usr = _usr_read_rules()
                listing = usr_listing + listing
                read = usr + devices_read + std
                if allow_site:
                    read += prefixes
            execute = [exe] + [os.path.realpath(p) for p in spec.get("execute", ())]
            try:
                rep["landlock"] = s.landlock(abi, read, execute, rw, listing)
            except OSError as e:
                rep["landlock"] = "off: " + str(e)
    program = bytes.fromhex(spec.get("seccomp") or "")
    if "seccomp" in want:
        if not program:
            rep["seccomp"] = "off: " + (spec.get("seccomp_why") or "no filter program")
        else:
            try:
                s.seccomp(program)
                rep["seccomp"] = "on (%d instructions)" % (len(program) // 8)
            except (OSError, ValueError) as e:
                rep["seccomp"] = "off: " + str(e)
    for name in ("ctypes", "_ctypes", "ctypes._endian", "ctypes.util"):
        sys.modules.pop(name, None)
    return rep
