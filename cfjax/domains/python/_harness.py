"""In-subprocess test harness of :mod:`cfjax.domains.python.world` (a script; never imported).

Invocation (by :class:`~cfjax.domains.python.world.PytestWorld` only)::

    python -S -s -P -B _harness.py harness WORKDIR MEM_BYTES CPU_S FSIZE_BYTES NOFILE
    python    -s -P -B _harness.py pytest  WORKDIR ...                      (real pytest)

with the working directory ``WORKDIR`` holding ``solution.py`` (the candidate;
in pytest mode also ``test_task.py``), and on stdin one message from the
parent (a :mod:`marshal`-ed dict: built in, so reading it costs no import):
``nonce``, ``sandbox`` (the OS-layer spec of :mod:`cfjax.sandbox._layers` or
None), and in harness mode ``function``, ``cases`` (``[name, arguments tuple]``)
and ``audit``. Its report is written to stdout as one line
``<nonce> <repr of a dict of plain values>``, which the parent reads with
:func:`ast.literal_eval`; every other output is ignored.

Order of events (everything before step 6 is trusted code):

0. the message is read to EOF, fd 0 is closed and re-opened on /dev/null; the
   OS layers are entered (namespaces, private root, PID namespace, non-root
   uid, ``no_new_privs``, Landlock, seccomp — whatever the machine allows);
1. resource limits (address space, CPU seconds, file size, open files,
   processes, core dumps) — soft = hard, so they cannot be raised again;
2. the report writer keeps a private duplicate of stdout; fd 1 becomes /dev/null;
3. the candidate is read and compiled;
4. ``sys.modules['__main__']`` is replaced by an empty module, modules whose
   only use here would be introspection (``_signal``, ``gc``...) are dropped
   from ``sys.modules``, unaudited primitives (``posix.mkfifo``, ``mknod``,
   ``_thread.start_new_thread``) are removed;
5. the audit hook is installed (``sys.addaudithook``; it cannot be removed);
6. the candidate is executed as module ``solution`` and its function called on
   each case's arguments, with per-case exception capture. The report holds,
   per case, the value (encoded: exact built-in types only, bounded) or the
   exception (the built-in classes it derives from, its type name and
   message). It holds no verdict: the parent compares with the expected
   values, which never enter this process.

The audit hook: **fatal** events (process creation or signalling, sockets,
ctypes, any ``open`` for writing or creating, deleting / renaming / chmod /
chown / mkdir / link / truncate / utime / xattr, ``chdir``, sqlite connect,
mmap, ``setrlimit``, adding another audit hook, importing ``subprocess``,
``socket``, ``ctypes``, ``multiprocessing``, ``pty``, ``mmap``, ``resource``
...) write a ``forbidden`` report and end the process at once with
``os._exit`` (the candidate cannot catch it). **Non-fatal** denials raise an
ordinary exception: reading or listing files outside the working directory
and the standard library (``PermissionError``), frame and object-graph
introspection (``sys._getframe``, ``tb_frame``/``gi_frame``..., ``gc``,
``sys.settrace``/``setprofile``, ``sys._current_frames``: ``ValueError``).
In ``pytest`` mode the frame/introspection denials are off (pytest needs
them), site-packages may be read, and the child judges the tests itself.

See :mod:`cfjax.domains.python.world` for the threat model.
"""

import sys
import posix

# The harness's own builtins: a private copy, so that a candidate that patches
# the ``builtins`` module cannot change how the harness classifies or reports.
import builtins as _real_builtins

__builtins__ = dict(_real_builtins.__dict__)

_FATAL_EVENTS = frozenset({
    "os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.kill", "os.killpg",
    "subprocess.Popen", "pty.spawn", "signal.pthread_kill", "os.startfile", "webbrowser.open",
    "os.remove", "os.rmdir", "os.rename", "os.chmod", "os.chown", "os.chflags", "os.lchflags", "os.link",
    "os.symlink", "os.truncate", "os.utime", "os.mkdir", "os.setxattr", "os.removexattr",
    "shutil.rmtree", "shutil.copyfile", "shutil.copymode",
    "shutil.copystat", "shutil.copytree", "shutil.move", "shutil.chown", "shutil.make_archive",
    "shutil.unpack_archive", "tempfile.mkstemp", "tempfile.mkdtemp", "sqlite3.connect",
    "sqlite3.connect/handle", "sqlite3.enable_load_extension", "sqlite3.load_extension", "mmap.__new__",
    "resource.setrlimit", "resource.prlimit", "sys.addaudithook", "urllib.Request", "syslog.openlog",
    "syslog.syslog", "fcntl.fcntl", "fcntl.ioctl", "fcntl.flock", "fcntl.lockf", "_posixsubprocess.fork_exec",
    "cpython.remote_debugger_script",
})
_FATAL_PREFIXES = ("socket.", "ctypes.", "ftplib.", "http.client.", "smtplib.", "nntplib.", "poplib.",
                   "imaplib.", "telnetlib.", "winreg.", "msvcrt.", "_winapi.")
_FATAL_IMPORTS = frozenset({
    "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing", "socket", "_socket", "ssl", "_ssl",
    "ctypes", "_ctypes", "cffi", "_cffi_backend", "pty", "tty", "termios", "mmap", "resource", "fcntl",
    "_posixshmem", "readline", "curses", "_curses", "dbm", "_dbm", "_gdbm", "shelve", "_xxsubinterpreters",
    "_xxinterpchannels", "_testcapi", "_testinternalcapi", "syslog", "webbrowser", "ensurepip", "venv",
})
# introspection: a plain exception, not a verdict (stdlib code falls back on it)
_DENIED_IMPORTS = frozenset({"gc", "_signal", "signal", "faulthandler", "_tracemalloc", "tracemalloc"})
_INTROSPECTION_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys._current_exceptions",
                                   "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                                   "gc.get_referents", "sys.getobjects"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_WRITE_FLAGS = (getattr(posix, "O_WRONLY", 1) | getattr(posix, "O_RDWR", 2) | getattr(posix, "O_CREAT", 64)
                | getattr(posix, "O_TRUNC", 512) | getattr(posix, "O_APPEND", 1024))
_MAX_MSG = 300


def _norm(path, cwd):
    """Absolute, ``..``-free form of a path string (no file-system access)."""
    if not path.startswith("/"):
        path = cwd + "/" + path
    parts = []
    for p in path.split("/"):
        if p == "" or p == ".":
            continue
        if p == "..":
            if parts:
                parts.pop()
            continue
        parts.append(p)
    return "/" + "/".join(parts)


def _under(path, roots):
    for r in roots:
        if path == r or path.startswith(r + "/"):
            return True
    return False


def _read_roots(cwd, allow_site):
    """Directories the candidate may read: the working directory and the standard library
    (plus site-packages in pytest mode); never anything outside the interpreter's prefixes."""
    prefixes = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        if p:
            p = _norm(p, cwd)
            if p not in prefixes:
                prefixes.append(p)
    roots = [cwd]
    for entry in sys.path:
        if not entry:
            continue
        e = _norm(entry, cwd)
        parts = e.split("/")
        if not _under(e, prefixes):
            continue
        if not allow_site and ("site-packages" in parts or "dist-packages" in parts):
            continue
        if e not in roots:
            roots.append(e)
    return tuple(roots)


def _make_emit(nonce, fd, layers):
    """The only writer of report lines; ``nonce`` lives only in this closure. Every report names
    the OS layers the sandbox got (``layers``)."""
    write = posix.write
    rep = repr
    enc = str.encode
    layers = dict(layers)

    def emit(payload):
        payload = dict(payload)
        payload["layers"] = layers
        data = enc("\n" + nonce + " " + rep(payload) + "\n", "utf-8", "replace")
        while data:
            n = write(fd, data)
            data = data[n:]

    return emit


def _make_hook(emit, cwd, roots, strict):
    deny_site = strict
    exit_ = posix._exit
    fatal_events = _FATAL_EVENTS
    fatal_prefixes = _FATAL_PREFIXES
    fatal_imports = _FATAL_IMPORTS
    denied_imports = _DENIED_IMPORTS if strict else frozenset()
    introspection = _INTROSPECTION_EVENTS if strict else frozenset()
    frame_attrs = _FRAME_ATTRS if strict else frozenset()
    write_flags = _WRITE_FLAGS
    norm, under = _norm, _under
    s_str = str.__str__
    s_dec = bytes.decode
    str_t, bytes_t, int_t, tuple_t = str, bytes, int, tuple
    type_ = type
    perm, val, imp, attr = PermissionError, ValueError, ImportError, AttributeError
    isinstance_, len_ = isinstance, len  # the hook reads no name from any builtins dict
    state = [False]  # re-entrancy guard

    def forbid(event, detail):
        if state[0]:
            exit_(3)
        state[0] = True
        try:
            emit({"status": "forbidden", "detail": event + ((" " + detail) if detail else "")})
        finally:
            exit_(3)

    def path_of(p):
        t = type_(p)
        if t is int_t:
            return None
        if t is bytes_t:
            return norm(s_dec(p, "utf-8", "surrogateescape"), cwd)
        if isinstance_(p, str_t):
            return norm(s_str(p), cwd)
        return ""  # an object with __fspath__: refused (never call candidate code here)

    def hook(event, args):
        if event == "os.chdir":
            if not (args and path_of(args[0]) == cwd):  # pytest changes to its rootdir (the work dir)
                forbid(event, "")
            return
        if event in fatal_events or event.startswith(fatal_prefixes):
            detail = args[0] if (args and type_(args[0]) is str_t) else ""
            forbid(event, s_str(detail)[:120] if detail else "")
        if event == "open":
            path, mode, flags = (tuple_t(args) + (None, None, None))[:3]
            if type_(mode) is str_t and ("w" in mode or "a" in mode or "x" in mode or "+" in mode):
                forbid("open for writing", path if type_(path) is str_t else "")
            if type_(flags) is int_t and flags & write_flags:
                forbid("open for writing", path if type_(path) is str_t else "")
            p = path_of(path)
            if p is not None and (p == "" or not under(p, roots)
                                  or (deny_site and ("/site-packages" in p or "/dist-packages" in p))):
                raise perm("reading outside the sandbox is not allowed")
        elif event == "import":
            name = args[0]
            if type_(name) is str_t:
                top = name.split(".", 1)[0]
                if top in fatal_imports:
                    forbid("import", name)
                if top in denied_imports:
                    raise imp("module " + name + " is not available in the sandbox")
        elif event in ("os.listdir", "os.scandir", "glob.glob", "glob.glob/2"):
            path = args[0] if args else None
            if event.startswith("glob"):
                if type_(path) is str_t and (path.startswith("/") or ".." in path):
                    raise perm("listing outside the sandbox is not allowed")
            else:
                p = cwd if path is None else path_of(path)
                if p is not None and (p == "" or not under(p, roots)
                                      or (deny_site and ("/site-packages" in p or "/dist-packages" in p))):
                    raise perm("listing outside the sandbox is not allowed")
        elif event in introspection:
            raise val("frame and object introspection are disabled in the sandbox")
        elif event == "object.__getattr__" and len_(args) > 1 and args[1] in frame_attrs:
            raise attr("frame access is disabled in the sandbox")

    return hook


def _limits(mem, cpu, fsize, nofile):
    import resource

    def lim(which, value):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

    if mem > 0:
        lim(resource.RLIMIT_AS, mem)
    if cpu > 0:
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        except (ValueError, OSError):
            pass
    if fsize > 0:
        lim(resource.RLIMIT_FSIZE, fsize)
    if nofile > 0:
        lim(resource.RLIMIT_NOFILE, nofile)
    lim(resource.RLIMIT_CORE, 0)
    if hasattr(resource, "RLIMIT_NPROC"):
        lim(resource.RLIMIT_NPROC, 0)  # no effect for root; the audit hook is the real barrier
    sys.modules.pop("resource", None)


def _read_message(limit=64 << 20):
    """The parent's one message (a ``marshal``-ed dict of plain values: trusted data) from fd 0,
    read to EOF; fd 0 is then /dev/null."""
    chunks, n = [], 0
    while n <= limit:
        chunk = posix.read(0, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        n += len(chunk)
    posix.close(0)
    fd = posix.open("/dev/null", posix.O_RDONLY)  # fd 0 again: nothing can be read from stdin
    if fd != 0:
        posix.dup2(fd, 0)
        posix.close(fd)
    import marshal  # built in: no import cost (``json`` would cost ~10 ms per evaluation)

    return marshal.loads(b"".join(chunks))


def _enter_sandbox(spec):
    """The OS layers (:mod:`cfjax.sandbox._layers`, loaded by path); may fork into a PID namespace."""
    sys.path.insert(0, spec["layers_dir"])
    try:
        import _layers
    finally:
        del sys.path[0]
    sys.modules.pop("_layers", None)
    return _layers.enter(spec)


def _msg(e, s_str=str.__str__, str_t=str, type_=type):
    """``str(e)`` as an exact, bounded ``str`` (a candidate's ``__str__`` may return anything)."""
    try:
        m = str_t(e)
        m = s_str(m) if isinstance(m, str_t) else "<unprintable>"
    except BaseException:
        m = "<unprintable>"
    return m[:_MAX_MSG]


def _tname(e, s_str=str.__str__, str_t=str, type_=type):
    try:
        n = type_(e).__name__
        return s_str(n)[:80] if isinstance(n, str_t) else "Exception"
    except BaseException:
        return "Exception"


def _make_encoder(budget_bytes, max_depth=100):
    """The child's only way to describe a value: plain built-in values (exact types, as the suite's
    ``_plain``) become tagged tuples of literals; anything else becomes ``("o", type name)``.

    Never calls candidate code: types are compared by identity (``t in (...)`` would call a
    metaclass's ``__eq__``), and only the built-in methods taken before the candidate runs are
    used. ``budget_bytes`` bounds the report's size over *all* cases (each value is charged its
    worst-case ``repr`` length), so the report always fits the output limit and one huge value
    costs only its own test; an ``int`` too long for ``repr`` (over ~4,000 digits) is opaque."""
    type_, len_ = type, len
    none_t, bool_t, int_t, float_t, str_t, list_t, tuple_t, dict_t = (type(None), bool, int, float, str, list,
                                                                       tuple, dict)
    float_repr = float.__repr__
    items = dict.items
    bit_length = int.bit_length
    type_name = type.__dict__["__name__"].__get__
    left = [budget_bytes]

    def charge(n):
        left[0] -= n
        if left[0] < 0:
            raise OverflowError

    def enc(v, depth):
        if depth > max_depth:
            raise OverflowError
        t = type_(v)
        if t is none_t or t is bool_t:
            charge(6)
            return v
        if t is int_t:
            bits = bit_length(v)
            if bits > 13_000:
                charge(16)
                return ("o", "int")
            charge(bits // 3 + 4)
            return v
        if t is float_t:
            charge(32)
            return ("f", float_repr(v))
        if t is str_t:
            charge(10 * len_(v) + 10)
            return ("s", v)
        if t is list_t or t is tuple_t:
            charge(12)
            return ("l" if t is list_t else "t", [enc(x, depth + 1) for x in v])
        if t is dict_t:
            charge(12)
            return ("d", [(enc(k, depth + 1), enc(x, depth + 1)) for k, x in items(v)])
        charge(100)
        return ("o", type_name(t))

    def encode(value):
        saved = left[0]
        try:
            return enc(value, 0)
        except (OverflowError, RecursionError):
            left[0] = saved - 100
            return ("o", "a value too large to report")
        except BaseException:  # a list mutated by its own __index__... : not a plain value
            left[0] = saved - 100
            return ("o", "an unreadable value")

    return encode


def _exception_names(e, builtins_dict):
    """The built-in exception classes ``e`` is an instance of (most derived first), so the parent
    can decide ``pytest.raises(KeyError)``-style checks without trusting the candidate's classes."""
    mro = type.__dict__["__mro__"].__get__(type(e))
    name_of = type.__dict__["__name__"].__get__
    out = []
    for c in mro:
        n = name_of(c)
        if builtins_dict.get(n) is c:
            out.append(n)
    return out


def _strict(msg_in, emit, cwd, layers):
    """MODE harness: define the candidate, call its function on each case's arguments, report the
    values (the parent alone holds the expected values and decides; see the module docstring)."""
    msg, tname = _msg, _tname
    MemoryError_, BaseException_ = MemoryError, BaseException
    type_ = type
    exit_ = posix._exit
    try:
        with open("solution.py", "rb") as f:
            cand_src = f.read()
    except OSError as e:
        emit({"status": "harness_error", "detail": msg(e), "layers": layers})
        exit_(2)
    try:
        cand_code = compile(cand_src, "solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        emit({"status": "syntax_error", "detail": tname(e) + ": " + msg(e), "layers": layers})
        exit_(0)
    fname = msg_in["function"]
    cases = [(name, tuple(args)) for name, args in msg_in["cases"]]
    audit = msg_in.get("audit", True) is not False
    fsize = int(msg_in.get("fsize", 1 << 20))
    del msg_in

    import _thread
    import types  # noqa: F401  (importing it reads a traceback's frame: done before the hook)

    del types

    encode = _make_encoder(max(4096, fsize // 2 if fsize < (256 << 10) else fsize - (128 << 10)))
    builtins_dict = dict(_real_builtins.__dict__)
    exc_names = _exception_names
    module_type = type_(sys)
    solution = module_type("solution")
    solution.__file__ = cwd + "/solution.py"
    solution.__builtins__ = _real_builtins  # not the harness's private copy

    # step 4: nothing of the harness stays reachable from sys.modules
    sys.modules["__main__"] = module_type("__main__")
    for name in ("_signal", "signal", "gc", "faulthandler", "_tracemalloc", "tracemalloc"):
        sys.modules.pop(name, None)

    # not a harness function (whose __globals__ would expose the harness): starting a thread
    # now fails with "'NoneType' object is not callable"
    for name in ("start_new_thread", "start_new"):
        if hasattr(_thread, name):
            setattr(_thread, name, None)
    for name in ("mkfifo", "mknod", "chroot"):
        if hasattr(posix, name):
            delattr(posix, name)
    if audit:
        sys.addaudithook(_make_hook(emit, cwd, _read_roots(cwd, allow_site=False), strict=True))

    # step 6: untrusted code from here on
    sys.modules["solution"] = solution
    ns = solution.__dict__
    try:
        exec(cand_code, ns)
    except MemoryError_:
        emit({"status": "memory", "detail": "MemoryError while loading the candidate", "layers": layers})
        exit_(0)
    except BaseException_ as e:
        emit({"status": "import_error", "detail": tname(e) + ": " + msg(e), "layers": layers})
        exit_(0)
    fn = dict.get(ns, fname)
    if fn is None:
        emit({"status": "import_error", "detail": "ImportError: cannot import name " + repr(fname)
              + " from 'solution'", "layers": layers})
        exit_(0)
    results = []
    for name, args in cases:
        try:
            got = fn(*args)
        except MemoryError_:
            results.append((name, "memory"))
            continue
        except BaseException_ as e:
            results.append((name, "raised", exc_names(e, builtins_dict), tname(e), msg(e)))
            continue
        results.append((name, "value", encode(got)))
    emit({"status": "ok", "results": results, "layers": layers})
    exit_(0)


def _pytest(emit, cwd, layers):
    """MODE pytest: a real ``pytest.main`` run of the test file in the work directory, which the
    child then judges itself (the cross-check runner: its verdict is trusted, so it is not for
    adversarial code; see the module docstring)."""
    import pytest

    order = []
    verdict = {}
    load_errors = []

    hook = _make_hook(emit, cwd, _read_roots(cwd, allow_site=True), strict=False)

    class Collector:
        @pytest.hookimpl(tryfirst=True)
        def pytest_collection(self, session):
            # pytest has configured itself; candidate code first runs when the tests are collected
            sys.addaudithook(hook)

        def pytest_collectreport(self, report):
            if report.failed:
                load_errors.append(str(report.longrepr)[-_MAX_MSG:])

        def pytest_runtest_logreport(self, report):
            name = report.nodeid.split("::")[-1]
            if name not in verdict:
                order.append(name)
                verdict[name] = ("passed", "")
            if report.failed and verdict[name][0] == "passed":
                crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
                m = crash.message if crash is not None else str(report.longrepr)
                kind = "memory" if m.startswith("MemoryError") else "failed"
                verdict[name] = (kind, m.split("\n", 1)[0][:_MAX_MSG])

    for name in ("mkfifo", "mknod", "chroot"):
        if hasattr(posix, name):
            delattr(posix, name)
    try:
        code = pytest.main(["-q", "-s", "-p", "no:cacheprovider", "-c", "pytest.ini", "--rootdir", cwd,
                            "test_task.py"], plugins=[Collector()])
    except MemoryError:
        emit({"status": "memory", "detail": "MemoryError", "layers": layers})
        posix._exit(0)
    if load_errors and not order:
        emit({"status": "import_error", "detail": load_errors[0], "layers": layers})
    else:
        emit({"status": "ok", "tests": [(n, verdict[n][0], verdict[n][1]) for n in order], "exit": int(code),
              "layers": layers})
    posix._exit(0)


def main(argv):
    mode, cwd = argv[1], argv[2]
    mem, cpu, fsize, nofile = (int(x) for x in argv[3:7])
    message = _read_message()
    spec = message.get("sandbox")
    layers = _enter_sandbox(spec) if spec else {}
    posix.chdir(cwd)
    _limits(mem, cpu, fsize, nofile)
    emit = _make_emit(message["nonce"], posix.dup(1), layers)
    message["nonce"] = None
    null = posix.open("/dev/null", posix.O_WRONLY)  # the candidate's (and pytest's) stdout is discarded
    posix.dup2(null, 1)
    posix.close(null)
    if mode == "pytest":
        del message
        _pytest(emit, cwd, layers)
    else:
        _strict(message, emit, cwd, layers)


if __name__ == "__main__":
    main(sys.argv)
