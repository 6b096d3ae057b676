"""User bug-fixing tasks for ``--suite jsonl:PATH`` (:mod:`cfjax.domains.jsonl`): QuixBugs and HumanEvalPack rows.

**QuixBugs-style rows** (``"domain": "python"``):

===============  =====================================================================================
``source``       the buggy program (a module: the function and any helpers); or ``source_path``, a
                 ``.py`` file relative to the JSONL file's folder (QuixBugs' ``python_programs/<name>.py``)
``entry_point``  the function to fix (default: the program's first top-level function)
``cases``        input/output cases, QuixBugs' ``json_testcases`` form: ``[[args...], expected]`` pairs
                 of JSON values, where ``{"tuple": [...]}`` is a tuple and ``{"dict": [[key, value],
                 ...]}`` a dict with any keys (so ``{"dict": [["tuple", 1]]}`` is the dict ``{"tuple":
                 1}``); every other object is a dict. With them, optionally:
                 ``"compare": "list"`` — the result is a generator: its items are compared
                 (``list(f(...))``, at most the world's ``max_items``); ``"abs_tol"`` / ``"rel_tol"`` —
                 numbers (also inside lists, tuples and dict values) are compared with
                 ``math.isclose(got, expected, abs_tol=..., rel_tol=...)``
``tests_path``   or ``tests``: a test file (path / text) whose tests are of the forms
                 :data:`cfjax.domains.python.cases.CASE_FORMS` (e.g. ``assert f(1) == 2``)
``test``         or a *check program*: code defining ``check(candidate)`` (asserts, loops, helpers,
                 tolerances, seeded random inputs...) or top-level asserts calling the entry point; run
                 as written in a sandbox of its own, calling the candidate through a proxy
                 (:mod:`cfjax.domains.python.proxy`); ``check(<entry_point>)`` is appended when the
                 code defines ``check`` but never calls it
``question``     the request (default: "Fix the bug in `f` so that it passes its tests.")
``fix``          the corrected program (optional; analysis only, never shown to an agent); it must
                 define the entry point as a top-level function, helpers before it are fine
===============  =====================================================================================

**HumanEvalPack rows** (``bigcode/humanevalpack``'s Python rows as they are; recognised by
``buggy_solution``): ``task_id``, ``prompt`` (signature and docstring, with any helpers and imports
before the entry point), ``buggy_solution``, ``canonical_solution``, ``test`` (``def
check(candidate): ...`` and the call ``check(<entry_point>)``), ``entry_point``, and optionally
``declaration`` (the signature alone: used when ``prompt`` is absent), ``example_test`` (accepted, not
used). As the bigcode-evaluation-harness composes them: the program the agent repairs is ``prompt +
buggy_solution`` (HumanEvalFixDocs' context), the answer key is ``prompt + canonical_solution``
(``get_reference(get_solution=True)``), and the check runs with the harness's standard-library
imports (:data:`HUMANEVAL_IMPORTS`: its ``IMPORT_HELPER`` without ``numpy``, which the sandbox does not
offer) and the prompt's code before it — in the check's process (so ``poly`` or ``encode_cyclic``
are there), and in the candidate's, before the action (so a fix of the entry point alone works, as
in the benchmark). The canonical solution never enters either process. The default question is
HumanEvalPack's instruction, "Fix bugs in `f`."

The environment is the program (the entry point's name), unless the line gives ``env`` (e.g. one
repository for several functions). The context an agent sees is the buggy program; the action is
the complete corrected program (a module that defines the entry point and its helpers). The world
is :class:`~cfjax.domains.python.world.PytestWorld`: cases are rendered into a test file under the
suite root and judged by the parent; a check program is written there too and runs in its own
sandboxed process; neither is shown to the agent nor reachable by the candidate
(``feedback="user"`` reports a failing case's call and the action's own result, or the failing
check line and the last call, not the expected value).

:class:`UserPyScript` (:mod:`cfjax.domains.python.user_draft`, agent side, re-exported here) is the
scripted backbone's *gold-free* repairer: it holds the buggy programs the prompts show and no answer key. Every attempt rewrites the program with one rule edit of
:func:`cfjax.domains.python.edits.rule_edits` (the repair operators and the distractors), drawn
uniformly from the attempt's seeded stream; it knows no true fix, so its local alternatives are rule
edits that only the world's tests can tell apart — a mutation-based repair search.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cfjax.domains.python._astsafe import parse as ast_parse
from cfjax.domains.jsonl import Parsed, RowReader, UserDomain, UserRow
from cfjax.domains.python.cases import parse_cases, render_check_program
from cfjax.domains.python.edits import entry_name
from cfjax.domains.python.tasks import _TEST_HEADER, observe_attrs
from cfjax.domains.python.user_draft import UserPyScript
from cfjax.domains.python.world import task_test_path
from cfjax.types import AnswerKey, Task

__all__ = ["UserPython", "UserPyScript", "render_case_tests", "DOMAIN", "HUMANEVAL_IMPORTS", "json_value"]

#: the bigcode-evaluation-harness's Python ``IMPORT_HELPER`` (HumanEvalPack) without ``numpy``: the
#: sandbox offers the standard library only
HUMANEVAL_IMPORTS = ("import math\nimport re\nimport sys\nimport copy\nimport datetime\nimport itertools\n"
                     "import collections\nimport heapq\nimport statistics\nimport functools\nimport hashlib\n"
                     "import string\nfrom typing import *\nfrom collections import *\n")

#: the tolerance helper of a rendered test file (``abs_tol`` / ``rel_tol`` rows), after ``_TEST_HEADER``
_CLOSE_HELPER = """


def _close(got, want, abs_tol, rel_tol):
    import math

    if type(got) in (int, float) and type(want) in (int, float):
        return math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol)
    if type(got) in (list, tuple) and type(got) is type(want):
        return len(got) == len(want) and all(_close(g, w, abs_tol, rel_tol) for g, w in zip(got, want))
    if type(got) is dict and type(want) is dict:
        return got.keys() == want.keys() and all(_close(got[k], want[k], abs_tol, rel_tol) for k in got)
    return got == want


def _check_close(call, got, want, abs_tol, rel_tol):
    assert _plain(got), call + " returned " + _shown(got) + ", expected " + repr(want)
    assert _close(got, want, abs_tol, rel_tol), call + " returned " + repr(got) + ", expected " + repr(want)
"""


def render_case_tests(function: str, cases: Sequence[tuple[Sequence[Any], Any]], task_id: str, *,
                      materialize: bool = False, abs_tol: float | None = None, rel_tol: float = 0.0) -> str:
    """A test file of ``_check`` cases (:data:`~cfjax.domains.python.cases.CASE_FORMS`) from
    input/output pairs: ``list(f(...))`` when ``materialize``, ``_check_close`` with a tolerance."""
    parts = [_TEST_HEADER.format(fn=function, task_id=task_id)]
    if abs_tol is not None:
        parts.append(_CLOSE_HELPER)
    for k, (args, want) in enumerate(cases):
        call = f"{function}({', '.join(repr(a) for a in args)})"
        if materialize:
            call = f"list({call})"
        if abs_tol is None:
            line = f"_check({call!r}, {call}, {want!r})"
        else:
            line = f"_check_close({call!r}, {call}, {want!r}, {abs_tol!r}, {rel_tol!r})"
        parts.append(f"\n\ndef test_{k:03d}():\n    {line}\n")
    return "".join(parts)


def json_value(v: Any, depth: int = 0) -> Any:
    """A JSON case value as a Python value: ``{"tuple": [...]}`` → tuple, ``{"dict": [[k, v], ...]}``
    → dict (any keys), other objects → dicts, lists → lists (``ValueError`` naming what is wrong)."""
    if depth > 100:
        raise ValueError("nested too deeply")
    if isinstance(v, list):
        return [json_value(x, depth + 1) for x in v]
    if isinstance(v, dict):
        if len(v) == 1:
            (tag, inner), = v.items()
            if tag == "tuple":
                if not isinstance(inner, list):
                    raise ValueError(f'{{"tuple": ...}} takes a list, got {inner!r:.60}')
                return tuple(json_value(x, depth + 1) for x in inner)
            if tag == "dict":
                if not (isinstance(inner, list) and all(isinstance(p, list) and len(p) == 2 for p in inner)):
                    raise ValueError(f'{{"dict": ...}} takes a list of [key, value] pairs, got {inner!r:.60}')
                out = {}
                for key, x in inner:
                    key = json_value(key, depth + 1)
                    try:
                        out[key] = json_value(x, depth + 1)
                    except TypeError:
                        raise ValueError(f"the dict key {key!r:.60} is not hashable (a list? write "
                                         '{"tuple": [...]})') from None
                return out
        return {key: json_value(x, depth + 1) for key, x in v.items()}
    return v


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((st for st in tree.body if isinstance(st, ast.FunctionDef) and st.name == name), None)


def _parse(r: RowReader, field_name: str, text: str, what: str) -> ast.Module:
    try:
        return ast_parse(text)
    except SyntaxError as e:
        raise r.error(field_name, f"{what} does not parse (line {e.lineno}: {e.msg})") from None
    except (ValueError, MemoryError, RecursionError) as e:
        raise r.error(field_name, f"{what} does not parse ({type(e).__name__})") from None


def _check_test(r: RowReader, field_name: str, test: str, name: str) -> str:
    """A row's check code (``test``): it must parse and either define ``check`` (then it is called
    with the entry point, unless the code calls it already) or use the entry point at top level."""
    tree = _parse(r, field_name, test, "the check")
    defines = any(isinstance(st, ast.FunctionDef) and st.name == "check" for st in tree.body)
    calls = any(isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name)
                and st.value.func.id == "check" for st in tree.body)
    if defines:
        return test if calls else test.rstrip("\n") + f"\n\n\ncheck({name})\n"
    uses = any(isinstance(n, ast.Name) and n.id == name for st in tree.body
               if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in ast.walk(st))
    if not uses:
        raise r.error(field_name, f"the check neither defines check(candidate) nor calls {name!r} at top level")
    return test


class UserPython(UserDomain):
    """QuixBugs-style and HumanEvalPack rows (module docstring)."""

    name = "python"

    def __init__(self) -> None:
        self.programs: dict[str, str] = {}

    def parse(self, r: RowReader) -> Parsed:
        if r.has("buggy_solution"):
            return self._humanevalpack(r)
        if r.has("source"):
            src_field, source, origin = "source", r.text("source"), None
        elif r.has("source_path"):
            src_field = "source_path"
            p, source = r.read_text("source_path", kind="source file")
            origin = p.name
        else:
            raise r.error("source", "missing (the buggy program: source, or source_path; or a HumanEvalPack row: "
                                    "prompt, buggy_solution, canonical_solution, test, entry_point)")
        tree = _parse(r, src_field, source, "the program")
        name = r.text("entry_point") if r.has("entry_point") else entry_name(source)
        if name is None:
            raise r.error(src_field, "the program defines no top-level function")
        fn = _function(tree, name)
        if fn is None:
            raise r.error("entry_point", f"the program defines no top-level function {name!r}")
        fix = r.text("fix", required=False)
        if fix is not None and _function(_parse(r, "fix", fix, "the fix"), name) is None:
            raise r.error("fix", f"the fix does not define the top-level function {name!r}")
        tests_field = r.first(("cases", "tests_path", "tests", "test"))
        if tests_field is None:
            raise r.error("cases", "missing (input/output cases, tests_path / tests, or a check program: test)")
        options = self._case_options(r, tests_field)
        render = None
        if tests_field == "test":
            test_text = render_check_program(name, "", _check_test(r, "test", r.text("test"), name))
        elif tests_field == "cases":
            test_text, render = None, (self._cases(r), options)
            self._check_cases(r, tests_field, render_case_tests(name, render[0], "check", **options), name)
        else:
            if tests_field == "tests_path":
                _, test_text = r.read_text("tests_path", kind="tests file")
            else:
                test_text = r.text("tests")
            self._check_cases(r, tests_field, test_text, name)
        question = r.text("question") if r.has("question") else f"Fix the bug in `{name}` so that it passes its tests."
        head = f"# Program `{name}`" + (f" ({origin})" if origin else "") + ": it has a bug.\n"
        return self._parsed(question, name, fn, head, source, fix or "", (source, test_text, render))

    # ------------------------------------------------------------------ row kinds
    def _humanevalpack(self, r: RowReader) -> Parsed:
        name = r.text("entry_point")
        base_field = "prompt" if r.has("prompt") else "declaration" if r.has("declaration") else None
        if base_field is None:
            raise r.error("prompt", "missing (a HumanEvalPack row needs its prompt, or its declaration)")
        base = r.text(base_field)
        buggy = r.text("buggy_solution")
        canonical = r.get("canonical_solution", str, required=False)
        source = base + buggy
        tree = _parse(r, "buggy_solution", source, f"{base_field} + buggy_solution")
        fn = _function(tree, name)
        if fn is None:
            raise r.error("entry_point", f"{base_field} + buggy_solution defines no top-level function {name!r}")
        gold = ""
        if canonical is not None and canonical.strip():
            gold = base + canonical
            if _function(_parse(r, "canonical_solution", gold, f"{base_field} + canonical_solution"), name) is None:
                raise r.error("canonical_solution", f"{base_field} + canonical_solution defines no function {name!r}")
        if r.has("example_test"):
            r.get("example_test", str)
        test = _check_test(r, "test", r.text("test"), name)
        # the task's own code before the check and the candidate: the prompt (helpers, imports) when
        # it is a program on its own (a signature with its docstring is); never the canonical solution
        prompt = r.text("prompt") if r.has("prompt") else ""
        try:
            ast_parse(prompt)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            prompt = ""
        prelude = HUMANEVAL_IMPORTS + ("\n" + prompt if prompt.strip() else "")
        test_text = render_check_program(name, prelude, test, preamble=prelude)
        question = r.text("question") if r.has("question") else f"Fix bugs in `{name}`."
        head = f"# Program `{name}`: it has a bug.\n"
        return self._parsed(question, name, fn, head, source, gold, (source, test_text, None))

    @staticmethod
    def _parsed(question: str, name: str, fn: ast.FunctionDef, head: str, source: str, gold: str,
                payload: tuple) -> Parsed:
        params = tuple(a.arg for a in fn.args.args)
        ret = ast.unparse(fn.returns) if fn.returns is not None else "None"
        attrs = observe_attrs(question, env=name, function=name, params=params, return_type=ret)
        context = head + "# Write the complete corrected program (the function and any helpers it uses).\n\n" \
            + source.strip() + "\n"
        return Parsed(question, name, context, attrs, gold=gold, payload=payload)

    @staticmethod
    def _case_options(r: RowReader, tests_field: str) -> dict:
        present = [f for f in ("compare", "abs_tol", "rel_tol") if r.has(f)]
        if present and tests_field != "cases":
            raise r.error(present[0], "applies to 'cases' only (a test file or a check program states its own "
                                      "comparisons)")
        compare = r.get("compare", str, required=False, default="equal")
        if compare not in ("equal", "list"):
            raise r.error("compare", f"must be 'equal' or 'list' (a generator's items), got {compare!r}")
        out: dict = {"materialize": compare == "list"}
        for f in ("abs_tol", "rel_tol"):
            v = r.get(f, (int, float), required=False)
            if v is not None and not 0 <= v < float("inf"):
                raise r.error(f, f"must be a number >= 0, got {v!r}")
            if v is not None:
                out[f] = float(v)
        if "rel_tol" in out and "abs_tol" not in out:
            out["abs_tol"] = 0.0
        return out

    @staticmethod
    def _cases(r: RowReader) -> tuple:
        cases = r.get("cases", list)
        if not cases:
            raise r.error("cases", "must hold at least one case")
        pairs = []
        for k, c in enumerate(cases):
            if not (isinstance(c, list) and len(c) == 2 and isinstance(c[0], list)):
                raise r.error("cases", f"case {k} must be [[args...], expected], got {c!r:.80}")
            try:
                pairs.append((tuple(json_value(c[0])), json_value(c[1])))
            except ValueError as e:
                raise r.error("cases", f"case {k}: {e}") from None
        return tuple(pairs)

    @staticmethod
    def _check_cases(r: RowReader, tests_field: str, text: str, name: str) -> None:
        advice = ("write such tests as a check program instead (the field 'test': code defining "
                  "check(candidate), run as written in a sandbox of its own), or as 'cases'")
        try:
            got = parse_cases(text, f"line {r.line}", advice=advice)
        except ValueError as e:
            raise r.error(tests_field, str(e).split(": ", 1)[-1]) from None
        if not got:
            raise r.error(tests_field, "no test: a test file needs top-level test_* functions")
        called = {c.function for c in got}
        if called != {name}:
            raise r.error(tests_field, f"the tests call {', '.join(sorted(called))}, not the entry point {name!r}")

    def finish(self, rows: Sequence[UserRow], path: Path, *, check: bool) -> None:
        self.programs = {r.task.task_id: r.payload[0] for r in rows}

    def _test_text(self, row: UserRow) -> str:
        _, text, render = row.payload
        if text is not None:
            return text
        cases, options = render
        return render_case_tests(row.task.attrs["function"], cases, row.task.task_id, **options)

    def write(self, rows: Sequence[UserRow], root: Path) -> None:
        from cfjax.infra.io import write_text_if_changed

        for row in rows:
            write_text_if_changed(task_test_path(root / "tests", row.task.task_id), self._test_text(row))

    def verify(self, rows: Sequence[UserRow], root: Path) -> None:
        for row in rows:
            path = task_test_path(root / "tests", row.task.task_id)
            if not path.is_file() or path.read_text(encoding="utf-8") != self._test_text(row):
                raise FileNotFoundError(f"test file {path} is missing or stale; rebuild the suite")

    def world(self, root: Path, keys: Mapping[str, AnswerKey], **kwargs) -> object:
        from cfjax.domains.python.world import PytestWorld

        return PytestWorld(root / "tests", keys, **kwargs)

    def envs(self) -> Mapping[str, object]:
        return {}

    @property
    def edits(self):
        from cfjax.domains.python.edits import PythonEdits

        return PythonEdits()

    def scripted_domain(self, tasks: Sequence[Task]):
        return UserPyScript({t.task_id: self.programs[t.task_id] for t in tasks})


DOMAIN = UserPython
