"""In-subprocess test harness of :mod:`cfjax.domains.python.world` (a script; never imported).

Invocation (by :class:`~cfjax.domains.python.world.PytestWorld` only)::

    python -S -s -P -B _harness.py harness WORKDIR MEM_BYTES CPU_S FSIZE_BYTES NOFILE
    python    -s -P -B _harness.py pytest  WORKDIR ...                      (real pytest)
    python -S -s -P -B _harness.py serve   WORKDIR ...     (a check program's candidate side)
    python -S -s -P -B _harness.py check   WORKDIR ...     (a check program's check side)

(``serve`` and ``check``: :mod:`cfjax.domains.python.proxy`; the two processes share only two
pipes, whose ends the message names, and the check's code reaches only the check process.)

with the working directory ``WORKDIR`` holding ``solution.py`` (the candidate;
in pytest mode also ``test_task.py``), and on stdin one message from the
parent (a :mod:`marshal`-ed dict: built in, so reading it costs no import):
``nonce``, ``sandbox`` (the OS-layer spec of :mod:`cfjax.sandbox._layers` or
None), and in harness mode ``function``, ``cases`` (``[name, arguments tuple]``)
and ``audit``. Its report lines are written to stdout (a file the parent opened
for appending) as ``<nonce> <repr of a dict of plain values>``, which the
parent reads with :func:`ast.literal_eval`: the first, ``started`` (with the
OS layers entered), before any candidate code; the last is the report. Every
other output is ignored.

Order of events (everything before step 6 is trusted code):

0. the message is read to EOF, fd 0 is closed and re-opened on /dev/null; the
   OS layers are entered (namespaces, private root, PID namespace, non-root
   uid, ``no_new_privs``, Landlock, seccomp — whatever the machine allows);
1. resource limits (address space, CPU seconds, file size, open files,
   processes, core dumps) — soft = hard, so they cannot be raised again;
2. the report writer keeps a private duplicate of stdout and writes the
   ``started`` line (the OS layers); fd 1 becomes /dev/null;
3. the candidate is read and compiled;
4. ``sys.modules['__main__']`` is replaced by an empty module, modules whose
   only use here would be introspection (``_signal``, ``gc``...) are dropped
   from ``sys.modules`` (so an ``import`` statement of them fails; see below
   for what that does not stop), unaudited primitives (``posix.mkfifo``,
   ``mknod``) are removed, and ``_thread.start_new_thread`` is replaced by a
   stub that ends the run as ``forbidden`` ("starting a thread": threads are
   not available in the sandbox; ``RLIMIT_NPROC`` is 0 for the sandbox's uid,
   so a thread module re-created through ``importlib`` fails to start one with
   ``RuntimeError: can't start new thread``);
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
and the standard library (``PermissionError``); the common introspection
routes (``sys._getframe``, the ``tb_frame``/``gi_frame``/``cr_frame``/
``ag_frame`` attributes, ``gc.get_objects``/``get_referrers``/``get_referents``,
``sys.settrace``/``setprofile``, ``sys._current_frames``: ``ValueError`` or
``AttributeError``); ``import`` statements of ``gc``, ``signal``, ``_signal``,
``faulthandler``, ``tracemalloc`` (``ImportError``).
In ``pytest`` mode the introspection denials are off (pytest needs them),
site-packages may be read, and the child judges the tests itself.

What is *not* denied (CPython 3.11 raises no audit event for it): the
introspection denials are a nuisance barrier, not a boundary. A built-in
module comes back through ``importlib.import_module("_signal")`` (the
``import`` event belongs to the ``import`` statement), a signal handler is
called with the interrupted frame, and ``frame.f_back``, ``f_globals`` and
``f_locals`` are not audited — so a candidate can walk from its own frame to
the harness's and call the report writer, nonce included. That forges
nothing: the report holds no verdict (the parent compares the reported values
with expected values that never enter this process, so a forged report is no
stronger than returning those values, and a forged failure scores 0), and the
OS layers the parent records come from the ``started`` line, written before
any candidate code to a stream opened for appending (a forged later line
cannot change them). ``tests/domains/python/test_sandbox_attacks.py`` runs
both routes (``test_signal_module_and_frame_walk_reach_the_writer_but_forge_nothing``).

See :mod:`cfjax.domains.python.world` for the threat model.

Length: one file on purpose — a sandboxed child imports exactly this module before any candidate
code (each further module costs every evaluation its import, and must be readable under
Landlock), so the four modes, the report writer, the audit hook and the call codec they share
live together.
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
    thread_event, no_threads = _THREAD_EVENT, _NO_THREADS

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
        if event == thread_event:
            forbid("starting a thread", "(" + no_threads + ")")
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


#: the audit event of :func:`_thread_stub` (the hook ends the run as ``forbidden``)
_THREAD_EVENT = "cfjax.start_thread"
_NO_THREADS = "threads are not available in the sandbox"


def _thread_stub(audit):
    """The stand-in for ``_thread.start_new_thread``: raises :data:`_THREAD_EVENT` (fatal under the
    hook: the outcome names the cause), else ``RuntimeError``. Defined in a namespace of its own, so
    its ``__globals__`` hold only ``sys.audit`` and ``RuntimeError``, nothing of the harness."""
    ns = {"__builtins__": {}, "_audit": audit, "_error": RuntimeError, "_event": _THREAD_EVENT,
          "_why": _NO_THREADS}
    exec("def start_new_thread(*args, **kwargs):\n    _audit(_event)\n    raise _error(_why)\n", ns)
    return ns["start_new_thread"]


_MAX_ITEMS = 100_000


def _make_items(limit=_MAX_ITEMS):
    """``list(value)`` of a returned iterable, at most ``limit`` items (``OverflowError`` past it), with
    the harness's own ``iter``/``next`` (a candidate's patched builtins are not used)."""
    iter_, next_, list_t, len_ = iter, next, list, len
    stop = StopIteration
    append = list.append

    def items(value):
        it = iter_(value)
        out = list_t()
        while True:
            try:
                x = next_(it)
            except stop:
                return out
            if len_(out) >= limit:
                raise OverflowError("the returned iterable has more than %d items" % limit)
            append(out, x)

    return items


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


def _candidate(emit, cwd, fname, audit, preamble=None, on_fail=None):
    """Steps 3–6 up to the candidate's function (the module docstring): read and compile
    ``solution.py``, drop what only introspection would use, install the audit hook, run the
    candidate's module (after ``preamble``, the task's own code, when given) and return its
    function ``fname``. A failure is reported (and passed to ``on_fail(status, detail)``) and ends
    the process."""
    msg, tname = _msg, _tname
    MemoryError_, BaseException_ = MemoryError, BaseException
    exit_ = posix._exit

    def fail(status, detail, code=0):
        if on_fail is not None:
            on_fail(status, detail)
        emit({"status": status, "detail": detail})
        exit_(code)

    try:
        with open("solution.py", "rb") as f:
            cand_src = f.read()
    except OSError as e:
        fail("harness_error", msg(e), 2)
    try:
        cand_code = compile(cand_src, "solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        fail("syntax_error", tname(e) + ": " + msg(e))
    pre_code = None
    if preamble:
        try:
            pre_code = compile(preamble, "<prelude>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:
            fail("harness_error", "the task's prelude does not compile: " + tname(e) + ": " + msg(e), 2)

    import _thread
    import types  # noqa: F401  (importing it reads a traceback's frame: done before the hook)

    del types
    module_type = type(sys)
    solution = module_type("solution")
    solution.__file__ = cwd + "/solution.py"
    solution.__builtins__ = _real_builtins  # not the harness's private copy

    # step 4: nothing of the harness stays reachable from sys.modules
    sys.modules["__main__"] = module_type("__main__")
    for name in ("_signal", "signal", "gc", "faulthandler", "_tracemalloc", "tracemalloc"):
        sys.modules.pop(name, None)

    stub = _thread_stub(sys.audit)
    for name in ("start_new_thread", "start_new"):
        if hasattr(_thread, name):
            setattr(_thread, name, stub)
    for name in ("mkfifo", "mknod", "chroot"):
        if hasattr(posix, name):
            delattr(posix, name)
    ns = solution.__dict__
    if pre_code is not None:  # the task's own code (HumanEvalPack's imports and prompt): trusted
        try:
            exec(pre_code, ns)
        except BaseException_ as e:
            fail("harness_error", "the task's prelude failed: " + tname(e) + ": " + msg(e), 2)
    if audit:
        sys.addaudithook(_make_hook(emit, cwd, _read_roots(cwd, allow_site=False), strict=True))

    # step 6: untrusted code from here on
    sys.modules["solution"] = solution
    try:
        exec(cand_code, ns)
    except MemoryError_:
        fail("memory", "MemoryError while loading the candidate")
    except BaseException_ as e:
        fail("import_error", tname(e) + ": " + msg(e))
    fn = dict.get(ns, fname)
    if fn is None:
        fail("import_error", "ImportError: cannot import name " + repr(fname) + " from 'solution'")
    return fn


def _strict(msg_in, emit, cwd, layers):
    """MODE harness: define the candidate, call its function on each case's arguments, report the
    values (the parent alone holds the expected values and decides; see the module docstring)."""
    msg, tname = _msg, _tname
    MemoryError_, BaseException_ = MemoryError, BaseException
    exit_ = posix._exit
    fname = msg_in["function"]
    cases = [(c[0], tuple(c[1]), len(c) > 2 and c[2] is True) for c in msg_in["cases"]]
    audit = msg_in.get("audit", True) is not False
    fsize = int(msg_in.get("fsize", 1 << 20))
    del msg_in

    encode = _make_encoder(max(4096, fsize // 2 if fsize < (256 << 10) else fsize - (128 << 10)))
    items = _make_items()
    builtins_dict = dict(_real_builtins.__dict__)
    exc_names = _exception_names
    fn = _candidate(emit, cwd, fname, audit)
    results = []
    for name, args, materialize in cases:
        try:
            got = fn(*args)
            if materialize:  # ``list(f(...))``: a generator's items, bounded
                got = items(got)
        except MemoryError_:
            results.append((name, "memory"))
            continue
        except BaseException_ as e:
            m = msg(e)
            if m == "can't start new thread":  # RLIMIT_NPROC: a thread module re-created by importlib
                m += " (" + _NO_THREADS + ")"
            results.append((name, "raised", exc_names(e, builtins_dict), tname(e), m))
            continue
        results.append((name, "value", encode(got)))
    emit({"status": "ok", "results": results})
    exit_(0)


# --------------------------------------------------------------------------- the check path
#
# MODE serve (the candidate) and MODE check (the benchmark's own check): two sandboxed processes
# joined by two pipes, started by :mod:`cfjax.domains.python.proxy`. The check calls the candidate's
# function through a proxy; arguments and results cross as data (the codec below: no code, no
# pickle), exceptions as (built-in classes, type name, message). The check process alone reports
# the verdict to the parent; the candidate process never sees the check's source or its report.


def _make_codec(max_bytes, max_depth=100):
    """``(encode, decode)`` of plain values: ``None``, ``bool``, ``int``, ``float``, ``str``,
    ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset`` (exact types only, compared by
    identity: a subclass or any other object is refused with ``TypeError``, and no method of a
    value is ever called). ``encode`` raises ``OverflowError`` past ``max_bytes`` or ``max_depth``;
    ``decode`` raises ``ValueError`` on anything malformed. The format is a prefix code:
    ``N T F``, ``i<digits>;``, ``f<repr>;``, ``s<n>:<utf-8>``, ``b<n>:<bytes>`` and
    ``l t d S Z <count>;`` followed by the items (``d``: key, value, key, value...)."""
    type_, len_ = type, len
    none_t, bool_t, int_t, float_t, str_t, bytes_t = type(None), bool, int, float, str, bytes
    list_t, tuple_t, dict_t, set_t, fset_t = list, tuple, dict, set, frozenset
    float_repr, int_repr = float.__repr__, int.__repr__
    str_enc, bytes_dec = str.encode, bytes.decode
    bit_length, items, find = int.bit_length, dict.items, bytes.find
    join, append = b"".join, list.append
    type_name = type.__dict__["__name__"].__get__
    seq_tags = {list_t: b"l", tuple_t: b"t", set_t: b"S", fset_t: b"Z"}
    get_tag = dict.get
    overflow, type_error, value_error = OverflowError, TypeError, ValueError

    def encode(value):
        out = []
        left = [max_bytes]

        def put(chunk):
            left[0] -= len_(chunk)
            if left[0] < 0:
                raise overflow("a value larger than %d bytes" % max_bytes)
            append(out, chunk)

        def enc(v, depth):
            if depth > max_depth:
                raise overflow("a value nested deeper than %d" % max_depth)
            t = type_(v)
            if t is none_t:
                put(b"N")
            elif t is bool_t:
                put(b"T" if v else b"F")
            elif t is int_t:
                if bit_length(v) > 13_000:
                    raise overflow("an integer too large to send")
                put(b"i" + str_enc(int_repr(v)) + b";")
            elif t is float_t:
                put(b"f" + str_enc(float_repr(v)) + b";")
            elif t is str_t:
                data = str_enc(v, "utf-8", "surrogatepass")
                put(b"s" + str_enc(int_repr(len_(data))) + b":")
                put(data)
            elif t is bytes_t:
                put(b"b" + str_enc(int_repr(len_(v))) + b":")
                put(v)
            elif t is dict_t:
                put(b"d" + str_enc(int_repr(len_(v))) + b";")
                for k, x in items(v):
                    enc(k, depth + 1)
                    enc(x, depth + 1)
            else:
                tag = get_tag(seq_tags, t)
                if tag is None:
                    raise type_error("an object of type " + type_name(t))
                put(tag + str_enc(int_repr(len_(v))) + b";")
                for x in v:
                    enc(x, depth + 1)

        enc(value, 0)
        return join(out)

    def decode(data):
        n = len_(data)

        def number(i, end):
            j = find(data, end, i)
            if j < 0 or j - i > 5000:
                raise value_error("malformed")
            return data[i:j], j + 1

        def dec(i, depth):
            if depth > max_depth or i >= n:
                raise value_error("malformed")
            c = data[i]
            i += 1
            if c == 78:  # N
                return None, i
            if c == 84:  # T
                return True, i
            if c == 70:  # F
                return False, i
            if c == 105:  # i
                raw, i = number(i, b";")
                return int_t(raw), i
            if c == 102:  # f
                raw, i = number(i, b";")
                return float_t(raw), i
            if c == 115 or c == 98:  # s, b
                raw, i = number(i, b":")
                k = int_t(raw)
                if k < 0 or i + k > n:
                    raise value_error("malformed")
                chunk = data[i:i + k]
                return (bytes_dec(chunk, "utf-8", "surrogatepass") if c == 115 else chunk), i + k
            if c in (108, 116, 100, 83, 90):  # l t d S Z
                raw, i = number(i, b";")
                k = int_t(raw)
                if k < 0 or k > n - i:
                    raise value_error("malformed")
                if c == 100:
                    out = {}
                    for _ in range(k):
                        key, i = dec(i, depth + 1)
                        out[key], i = dec(i, depth + 1)
                    return out, i
                seq = []
                for _ in range(k):
                    x, i = dec(i, depth + 1)
                    append(seq, x)
                if c == 108:
                    return seq, i
                return (tuple_t(seq) if c == 116 else set_t(seq) if c == 83 else fset_t(seq)), i
            raise value_error("malformed")

        try:
            value, end = dec(0, 0)
        except (TypeError, ValueError, OverflowError, RecursionError, MemoryError, UnicodeError):
            raise value_error("malformed") from None
        if end != n:
            raise value_error("malformed")
        return value

    return encode, decode


def _make_frames(rfd, wfd, max_bytes):
    """``(send, recv)``: length-prefixed frames over two pipe ends (blocking; the candidate side)."""
    read, write = posix.read, posix.write
    frombytes = int.from_bytes
    len_ = len

    def send(data):
        data = len_(data).to_bytes(4, "big") + data
        while data:
            data = data[write(wfd, data):]

    def read_exactly(k):
        out = b""
        while len_(out) < k:
            chunk = read(rfd, k - len_(out))
            if not chunk:
                return None
            out += chunk
        return out

    def recv():
        head = read_exactly(4)
        if head is None:
            return None
        k = frombytes(head, "big")
        if k > max_bytes + 64:
            return None
        return read_exactly(k)

    return send, recv


def _iterator_types():
    """The returned values the candidate side materialises as a generator's items (QuixBugs'
    generators, ``map``/``filter``/``zip``... and the built-in iterators); a bound applies."""
    import types

    out = {types.GeneratorType, map, filter, zip, enumerate, reversed}
    for sample in ([], (), "", {}, set(), range(0), {}.keys(), {}.values(), {}.items(), b"", bytearray()):
        out.add(type(iter(sample)))
    out.add(type(reversed([])))
    return frozenset(out)


def _serve(msg_in, emit, cwd, layers):
    """MODE serve: the candidate's side of the check path. Loads the candidate (after the task's
    own ``preamble``), answers ``ready`` (or its load failure), then each call frame from the check
    process with the value returned (a generator's items, bounded), or the exception raised, until
    the check process closes the pipe."""
    msg, tname = _msg, _tname
    MemoryError_, BaseException_ = MemoryError, BaseException
    exit_ = posix._exit
    type_, len_ = type, len
    fname = msg_in["function"]
    audit = msg_in.get("audit", True) is not False
    max_bytes = int(msg_in.get("max_value_bytes", 1 << 20))
    max_items = int(msg_in.get("max_items", _MAX_ITEMS))
    preamble = msg_in.get("preamble") or None
    send, recv = _make_frames(int(msg_in["req_fd"]), int(msg_in["resp_fd"]), max_bytes)
    encode, decode = _make_codec(max_bytes)
    items = _make_items(max_items)
    iterators = _iterator_types()
    builtins_dict = dict(_real_builtins.__dict__)
    exc_names = _exception_names
    tuple_t, dict_t = tuple, dict
    del msg_in

    def on_fail(status, detail):
        try:
            send(encode(("load_error", status, detail)))
        except BaseException_:
            pass

    fn = _candidate(emit, cwd, fname, audit, preamble=preamble, on_fail=on_fail)
    send(encode(("ready",)))
    calls = 0
    while True:
        frame = recv()
        if frame is None:
            break
        try:
            req = decode(frame)
            ok = type_(req) is tuple_t and len_(req) == 4 and req[0] == "call" and type_(req[2]) is tuple_t \
                and type_(req[3]) is dict_t
        except BaseException_:
            ok = False
        if not ok:
            break
        seq, args, kwargs = req[1], req[2], req[3]
        calls += 1
        try:
            got = fn(*args, **kwargs)
            gen = type_(got) in iterators
            if gen:
                got = items(got)
            reply = ("value", seq, got, gen)
        except MemoryError_:
            reply = ("raised", seq, ["MemoryError", "Exception", "BaseException"], "MemoryError", "")
        except BaseException_ as e:
            m = msg(e)
            if m == "can't start new thread":
                m += " (" + _NO_THREADS + ")"
            reply = ("raised", seq, exc_names(e, builtins_dict), tname(e), m)
        try:
            data = encode(reply)
        except OverflowError as e:  # past max_value_bytes / the depth bound
            data = encode(("unsendable", seq, msg(e), "size"))
        except TypeError as e:  # not a plain value (its type name)
            data = encode(("unsendable", seq, msg(e), "type"))
        except BaseException_:  # a container changed while it was encoded...
            data = encode(("unsendable", seq, "an unreadable value", "type"))
        send(data)
    emit({"status": "ok", "calls": calls})
    exit_(0)


class _CandidateGone(BaseException):
    """The candidate can no longer answer (it ended, timed out, broke the protocol): not an
    ``Exception``, so a check's ``except Exception`` does not hide it; the state is sticky too."""


def _check_main(msg_in, emit, cwd, layers):
    """MODE check: the benchmark's check, run as written — ``prelude`` (the task's own code), the
    name ``entry_point`` bound to the proxy, then ``test`` — reporting one verdict to the parent."""
    import select
    import time

    monotonic = time.monotonic
    exit_ = posix._exit
    msg, tname = _msg, _tname
    entry = msg_in["entry_point"]
    prelude, test = msg_in.get("prelude") or "", msg_in["test"]
    call_timeout = float(msg_in.get("call_timeout_s", 2.0))
    ready_timeout = float(msg_in.get("ready_timeout_s", 10.0))
    max_calls = int(msg_in.get("max_calls", 20_000))
    max_bytes = int(msg_in.get("max_value_bytes", 1 << 20))
    req, resp = int(msg_in["req_fd"]), int(msg_in["resp_fd"])
    del msg_in
    posix.set_blocking(req, False)
    posix.set_blocking(resp, False)
    poll_in, poll_out = select.poll(), select.poll()
    poll_in.register(resp, select.POLLIN)
    poll_out.register(req, select.POLLOUT)
    encode, decode = _make_codec(max_bytes)
    state = {"gone": None, "kind": None, "calls": 0, "seq": 0, "last": None, "raised": None}
    builtins_dict = _real_builtins.__dict__

    def gone(kind, detail):
        if state["gone"] is None:
            state["gone"], state["kind"] = detail, kind
        raise _CandidateGone(state["gone"])

    def wait(poller, deadline):
        left = deadline - monotonic()
        return left > 0 and bool(poller.poll(max(1, int(left * 1000))))

    def send(data, deadline):
        data = len(data).to_bytes(4, "big") + data
        while data:
            if not wait(poll_out, deadline):
                gone("timeout", "timeout")
            try:
                data = data[posix.write(req, data):]
            except BlockingIOError:
                continue
            except OSError:
                gone("ended", "the candidate's process ended")

    def read_exactly(k, deadline):
        out = b""
        while len(out) < k:
            if not wait(poll_in, deadline):
                gone("timeout", "timeout")
            try:
                chunk = posix.read(resp, k - len(out))
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                gone("ended", "the candidate's process ended")
            out += chunk
        return out

    def recv(deadline):
        k = int.from_bytes(read_exactly(4, deadline), "big")
        if k > max_bytes + 64:
            gone("protocol", "the candidate's process sent a frame larger than allowed")
        try:
            return decode(read_exactly(k, deadline))
        except ValueError:
            gone("protocol", "the candidate's process broke the call protocol")

    def shown(value, limit=120):
        try:
            text = repr(value)
        except BaseException:
            text = "<unprintable>"
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def rebuild(names, type_name, message):
        for n in names if isinstance(names, list) else ():
            cls = builtins_dict.get(n) if isinstance(n, str) else None
            if isinstance(cls, type) and issubclass(cls, BaseException):
                if issubclass(cls, Exception):
                    return cls(message)
                break  # SystemExit, KeyboardInterrupt...: never re-raised as such here
        return RuntimeError("the candidate raised " + str(type_name) + ": " + str(message))

    def proxy(*args, **kwargs):
        if state["gone"] is not None:
            raise _CandidateGone(state["gone"])
        if state["calls"] >= max_calls:
            gone("calls", "the check called `%s` more than %d times" % (entry, max_calls))
        call = entry + "(" + ", ".join([shown(a, 60) for a in args]
                                       + [k + "=" + shown(v, 60) for k, v in kwargs.items()]) + ")"
        try:
            data = encode(("call", state["seq"], args, kwargs))
        except TypeError as e:
            raise TypeError("%s: the check passed %s; only plain values (None, bool, int, float, str, bytes, "
                            "list, tuple, dict, set) reach the sandboxed candidate" % (call, e)) from None
        except OverflowError as e:
            raise OverflowError("%s: the arguments are too large to send (%s)" % (call, e)) from None
        state["calls"] += 1
        state["last"] = (call, None)
        deadline = monotonic() + call_timeout
        send(data, deadline)
        try:
            reply = recv(deadline)
        except _CandidateGone:
            if state["kind"] == "timeout":
                state["gone"] = "%s did not return within %g s" % (call, call_timeout)
            raise
        if not (isinstance(reply, tuple) and len(reply) >= 3 and reply[1] == state["seq"]):
            gone("protocol", "the candidate's process broke the call protocol")
        state["seq"] += 1
        kind = reply[0]
        if kind == "value" and len(reply) == 4:
            value = reply[2]
            state["last"] = (call, "returned " + shown(value))
            if reply[3] is True and isinstance(value, list):
                return (x for x in value)
            return value
        if kind == "raised" and len(reply) == 5:
            state["last"] = (call, "raised " + str(reply[3]) + ": " + str(reply[4])[:120])
            state["raised"] = rebuild(reply[2], reply[3], reply[4])
            raise state["raised"]
        if kind == "unsendable" and len(reply) == 4:
            state["last"] = (call, "returned " + str(reply[2]))
            if reply[3] == "size":
                raise OverflowError("%s returned %s: too large to leave the candidate's sandbox" % (call, reply[2]))
            raise TypeError("%s returned %s, which cannot leave the candidate's sandbox (only plain values can)"
                            % (call, reply[2]))
        gone("protocol", "the candidate's process broke the call protocol")

    proxy.__name__ = proxy.__qualname__ = entry

    def report(verdict, detail="", line=None, assertion=""):
        last = state["last"]
        emit({"status": "ok", "verdict": verdict, "detail": detail[:_MAX_MSG], "line": line,
              "assertion": assertion[:_MAX_MSG], "calls": state["calls"],
              "last": None if last is None else [last[0][:200], (last[1] or "")[:200]],
              "candidate": None if state["gone"] is None else [state["kind"], state["gone"][:_MAX_MSG]]})
        exit_(0)

    # the candidate's answer to loading: ready, or why not
    try:
        first = recv(monotonic() + ready_timeout)
    except _CandidateGone:
        if state["kind"] == "timeout":
            state["gone"] = "the candidate's process did not start within %g s" % ready_timeout
        elif state["kind"] == "ended":
            state["kind"] = "ended_loading"
        report("candidate")
    if isinstance(first, tuple) and len(first) == 3 and first[0] == "load_error":
        state["gone"], state["kind"] = str(first[2]), "load:" + str(first[1])
        report("candidate")
    if first != ("ready",):
        state["gone"], state["kind"] = "the candidate's process broke the call protocol", "protocol"
        report("candidate")

    ns = {"__name__": "__main__", "__builtins__": _real_builtins}
    try:
        pre = compile(prelude, "<prelude>", "exec", dont_inherit=True)
        code = compile(test, "<check>", "exec", dont_inherit=True)
        exec(pre, ns)
    except BaseException as e:
        emit({"status": "harness_error", "detail": "the task's check program failed before the check ran: "
              + tname(e) + ": " + msg(e)})
        exit_(2)
    ns[entry] = proxy
    sys.modules["__main__"] = type(sys)("__main__")
    sys.addaudithook(_make_hook(emit, cwd, _read_roots(cwd, allow_site=False), strict=False))

    def where(e):
        """The line of the check (``<check>``) where ``e`` was raised (its innermost frame there)."""
        line, tb = None, e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<check>":
                line = tb.tb_lineno
            tb = tb.tb_next
        return line

    try:
        exec(code, ns)
    except _CandidateGone:
        report("candidate")
    except AssertionError as e:
        if state["gone"] is not None:
            report("candidate")
        report("failed", "", where(e), msg(e))
    except BaseException as e:
        if state["gone"] is not None:
            report("candidate")
        if e is state.get("raised") and state["last"] is not None:  # the candidate's own exception
            call, what = state["last"]
            state["last"] = None
            report("error", call + " " + what, where(e))
        report("error", tname(e) + ": " + msg(e), where(e))
    if state["gone"] is not None:
        report("candidate")
    report("passed")


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
    emit({"status": "started"})  # the OS layers, before any candidate code (module docstring)
    null = posix.open("/dev/null", posix.O_WRONLY)  # the candidate's (and pytest's) stdout is discarded
    posix.dup2(null, 1)
    posix.close(null)
    if mode == "pytest":
        del message
        _pytest(emit, cwd, layers)
    elif mode == "serve":
        _serve(message, emit, cwd, layers)
    elif mode == "check":
        _check_main(message, emit, cwd, layers)
    else:
        _strict(message, emit, cwd, layers)


if __name__ == "__main__":
    main(sys.argv)
