"""User bug-fixing tasks for ``--suite jsonl:PATH`` (:mod:`cfjax.domains.jsonl`), QuixBugs style.

Fields of a line (``"domain": "python"``):

===============  =====================================================================================
``source``       the buggy program: the function's source text; or ``source_path``, a ``.py`` file
                 relative to the JSONL file's folder (QuixBugs' ``python_programs/<name>.py``)
``entry_point``  the function to fix (default: the program's first top-level function)
``cases``        input/output cases, QuixBugs' ``json_testcases`` form: ``[[args...], expected]`` pairs
                 (JSON values); or ``tests_path`` / ``tests``: a test file (path / text) whose tests are
                 of the forms :data:`cfjax.domains.python.cases.CASE_FORMS` (e.g. ``assert f(1) == 2``)
``question``     the request (default: "Fix the bug in `f` so that it passes its tests.")
``fix``          the corrected function (optional; analysis only, never shown to an agent)
===============  =====================================================================================

The environment is the program (the entry point's name), unless the line gives ``env`` (e.g. one
repository for several functions). The context an agent sees is the buggy program; the action is
the complete corrected function. The world is :class:`~cfjax.domains.python.world.PytestWorld`: the
cases are rendered into a test file under the suite root, judged by the parent, never shown to the
agent (``feedback="user"`` reports a failing case's call and the action's own result, not the
expected value). Cases must be literals (the parent compares values; no code of the tests runs).

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

from cfjax.domains.jsonl import Parsed, RowReader, UserDomain, UserRow
from cfjax.domains.python.cases import parse_cases
from cfjax.domains.python.edits import entry_name
from cfjax.domains.python.tasks import _TEST_HEADER, observe_attrs
from cfjax.domains.python.user_draft import UserPyScript
from cfjax.domains.python.world import task_test_path
from cfjax.types import AnswerKey, Task

__all__ = ["UserPython", "UserPyScript", "render_case_tests", "DOMAIN"]


def render_case_tests(function: str, cases: Sequence[tuple[Sequence[Any], Any]], task_id: str) -> str:
    """A test file of ``_check`` cases (one of :data:`~cfjax.domains.python.cases.CASE_FORMS`) from
    input/output pairs."""
    parts = [_TEST_HEADER.format(fn=function, task_id=task_id)]
    for k, (args, want) in enumerate(cases):
        call = f"{function}({', '.join(repr(a) for a in args)})"
        parts.append(f"\n\ndef test_{k:03d}():\n    _check({call!r}, {call}, {want!r})\n")
    return "".join(parts)


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((st for st in tree.body if isinstance(st, ast.FunctionDef) and st.name == name), None)


class UserPython(UserDomain):
    """QuixBugs-style rows (module docstring)."""

    name = "python"

    def __init__(self) -> None:
        self.programs: dict[str, str] = {}

    def parse(self, r: RowReader) -> Parsed:
        if r.has("source"):
            src_field, source, origin = "source", r.text("source"), None
        elif r.has("source_path"):
            src_field = "source_path"
            p, source = r.read_text("source_path", kind="source file")
            origin = p.name
        else:
            raise r.error("source", "missing (the buggy function: source, or source_path)")
        try:
            tree = ast.parse(source)
        except SyntaxError as e:
            raise r.error(src_field, f"the program does not parse (line {e.lineno}: {e.msg})") from None
        name = r.text("entry_point") if r.has("entry_point") else entry_name(source)
        if name is None:
            raise r.error(src_field, "the program defines no top-level function")
        fn = _function(tree, name)
        if fn is None:
            raise r.error("entry_point", f"the program defines no top-level function {name!r}")
        fix = r.text("fix", required=False)
        if fix is not None:
            try:
                ast.parse(fix)
            except SyntaxError as e:
                raise r.error("fix", f"the fix does not parse (line {e.lineno}: {e.msg})") from None
            if entry_name(fix) != name:  # the world names the task's function by the gold's first one
                raise r.error("fix", f"the fix's first top-level function must be {name!r}")
        tests_field = r.first(("cases", "tests_path", "tests"))
        if tests_field is None:
            raise r.error("cases", "missing (input/output cases, or tests_path / tests)")
        if tests_field == "cases":
            cases = r.get("cases", list)
            if not cases:
                raise r.error("cases", "must hold at least one case")
            pairs = []
            for k, c in enumerate(cases):
                if not (isinstance(c, list) and len(c) == 2 and isinstance(c[0], list)):
                    raise r.error("cases", f"case {k} must be [[args...], expected], got {c!r:.80}")
                pairs.append((tuple(c[0]), c[1]))
            test_text, render = None, tuple(pairs)
        else:
            if tests_field == "tests_path":
                _, test_text = r.read_text("tests_path", kind="tests file")
            else:
                test_text = r.text("tests")
            render = None
        check = test_text if test_text is not None else render_case_tests(name, render, "check")
        try:
            got = parse_cases(check, f"line {r.line}")
        except ValueError as e:
            raise r.error(tests_field, str(e).split(": ", 1)[-1]) from None
        if not got:
            raise r.error(tests_field, "no test: a test file needs top-level test_* functions")
        called = {c.function for c in got}
        if called != {name}:
            raise r.error(tests_field, f"the tests call {', '.join(sorted(called))}, not the entry point {name!r}")
        question = r.text("question") if r.has("question") else f"Fix the bug in `{name}` so that it passes its tests."
        params = tuple(a.arg for a in fn.args.args)
        ret = ast.unparse(fn.returns) if fn.returns is not None else "None"
        attrs = observe_attrs(question, env=name, function=name, params=params, return_type=ret)
        head = f"# Program `{name}`" + (f" ({origin})" if origin else "") + ": it has a bug.\n"
        context = head + "# Write the complete corrected function.\n\n" + source.strip() + "\n"
        return Parsed(question, name, context, attrs, gold=fix or "", payload=(source, test_text, render))

    def finish(self, rows: Sequence[UserRow], path: Path, *, check: bool) -> None:
        self.programs = {r.task.task_id: r.payload[0] for r in rows}

    def _test_text(self, row: UserRow) -> str:
        _, text, cases = row.payload
        return text if text is not None else render_case_tests(row.task.attrs["function"], cases, row.task.task_id)

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
