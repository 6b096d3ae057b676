"""SQL decision units and one-unit edits (papers/countermem.md §3.2, App. B.4).

A *decision unit* is the part of a query an agent decides in one step: the
projection (with its DISTINCT flag), one JOIN with its ON clause, one
conjunct of WHERE, the GROUP BY, one conjunct of HAVING, the ORDER BY, the
LIMIT. A local alternative (Eq. 1) replaces exactly one unit; everything else
is re-printed unchanged. Parsing and printing go through sqlglot's SQLite
dialect, so edits are structural, never regex surgery on the query string.

The module also defines *edit signatures*: a unit with identifiers, string
and number literals replaced by placeholders (``e.age > 18`` →
``<id>.<id> > <num>``). Two records give the same advice when their
(before, after) signatures match (redundancy, Eq. 4), and opposite advice when
one is the other reversed (conflict). :func:`transfer_edit` carries a stored
edit onto a new action by binding the placeholders of the stored ``before``
unit to the tokens of a matching unit in the new action — the mechanical part
of what an LLM does when it "applies the same correction here".

:func:`rule_edits` lists the rule operators' one-unit alternatives: first the
*repair* operators (whose edits undo the scripted backbone's slips), then
*distractor* operators (plausible, usually wrong edits; see its docstring).

Length: one module on purpose — units, printing, signatures, transfer and the
rule operators share one parse/print grammar (sqlglot's SQLite dialect), and the
operators must stay beside the unit definitions they rewrite.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from cfjax.types import EditError, EditModel, Unit, single_diff

__all__ = [
    "Unit",
    "EditError",
    "units",
    "replace_unit",
    "normalize",
    "signature",
    "tokenize",
    "transfer_edit",
    "diff_units",
    "alias_map",
    "rule_edits",
    "distractor_edits",
    "detokenize",
    "SQLEdits",
]

DIALECT = "sqlite"


def _parse(sql: str) -> exp.Select:
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except (ParseError, SqlglotError, ValueError) as e:  # sqlglot raises a few kinds
        raise EditError(f"cannot parse SQL: {e}") from None
    if not isinstance(tree, exp.Select):
        raise EditError(f"not a single SELECT statement: {type(tree).__name__}")
    return tree


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    return list(node.flatten()) if isinstance(node, exp.And) else [node]


def _select_text(tree: exp.Select) -> str:
    cols = ", ".join(e.sql(dialect=DIALECT) for e in tree.expressions)
    return f"SELECT {'DISTINCT ' if tree.args.get('distinct') else ''}{cols}"


def _unit_nodes(tree: exp.Select) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [("select", None)]
    for j in tree.args.get("joins") or []:
        out.append(("join", j))
    where = tree.args.get("where")
    for c in _conjuncts(where.this if where is not None else None):
        out.append(("where", c))
    if tree.args.get("group") is not None:
        out.append(("group", tree.args["group"]))
    having = tree.args.get("having")
    for c in _conjuncts(having.this if having is not None else None):
        out.append(("having", c))
    if tree.args.get("order") is not None:
        out.append(("order", tree.args["order"]))
    if tree.args.get("limit") is not None:
        out.append(("limit", tree.args["limit"]))
    return out


def units(sql: str) -> list[Unit]:
    """The decision units of ``sql`` in a fixed order.

    Raises:
      EditError: the action is not one parseable SELECT.
    """
    return list(_units(sql))


@functools.lru_cache(maxsize=1 << 16)
def _units(sql: str) -> tuple[Unit, ...]:
    # memoised: a pure function of the text, and parsing dominates the cost of
    # every simulator and generator step (errors are not cached: they re-raise)
    tree = _parse(sql)
    out = []
    for kind, node in _unit_nodes(tree):
        text = _select_text(tree) if kind == "select" else node.sql(dialect=DIALECT)  # type: ignore[union-attr]
        out.append(Unit(kind, text))
    return tuple(out)


def _parse_clause(template: str, text: str) -> exp.Select:
    return _parse(template.format(text))


@functools.lru_cache(maxsize=1 << 16)
def replace_unit(sql: str, index: int, new_text: str) -> str:
    """Return ``sql`` with decision unit ``index`` replaced by ``new_text``.

    Only that unit changes; the result is re-printed in the SQLite dialect.

    Raises:
      EditError: bad index, or the replacement does not parse as a unit of
        the same kind.
    """
    tree = _parse(sql)
    nodes = _unit_nodes(tree)
    if not 0 <= index < len(nodes):
        raise EditError(f"unit index {index} out of range (the action has {len(nodes)} units)")
    kind, node = nodes[index]
    new_text = new_text.strip().rstrip(";")
    if kind == "select":
        body = new_text if new_text.upper().startswith("SELECT") else f"SELECT {new_text}"
        rep = _parse_clause("{} FROM __unit__", body)
        tree.set("expressions", rep.expressions)
        tree.set("distinct", rep.args.get("distinct"))
    elif kind == "join":
        rep = _parse_clause("SELECT * FROM __unit__ {}", new_text)
        joins = rep.args.get("joins") or []
        if len(joins) != 1:
            raise EditError(f"replacement is not one JOIN clause: {new_text!r}")
        node.replace(joins[0])  # type: ignore[union-attr]
    elif kind in ("where", "having"):
        try:
            cond = sqlglot.parse_one(new_text, read=DIALECT)
        except (ParseError, SqlglotError, ValueError) as e:
            raise EditError(f"replacement predicate does not parse: {e}") from None
        if isinstance(cond, (exp.Select, exp.Subquery)):
            raise EditError(f"replacement is not a predicate: {new_text!r}")
        clause = tree.args[kind]
        parts = _conjuncts(clause.this)
        pos = next(i for i, p in enumerate(parts) if p is node)
        parts[pos] = cond
        tree.set(kind, exp.Where(this=exp.and_(*parts)) if kind == "where" else exp.Having(this=exp.and_(*parts)))
    elif kind in ("group", "order", "limit"):
        rep = _parse_clause("SELECT * FROM __unit__ {}", new_text)
        part = rep.args.get(kind)
        if part is None:
            raise EditError(f"replacement is not a {kind.upper()} clause: {new_text!r}")
        tree.set(kind, part)
    return tree.sql(dialect=DIALECT)


@functools.lru_cache(maxsize=1 << 16)
def normalize(sql: str) -> str:
    """Canonical print of an action (unparseable text is whitespace-normalised)."""
    try:
        return _parse(sql).sql(dialect=DIALECT)
    except EditError:
        return " ".join(sql.split())


def diff_units(before: str, after: str) -> tuple[int, Unit, Unit] | None:
    """The single unit in which two actions differ, or ``None`` if they differ
    in zero or several units (or do not parse, or have different unit kinds)."""
    try:
        return single_diff(units(before), units(after))
    except EditError:
        return None


# --------------------------------------------------------------------------- signatures

_KEYWORDS = frozenset(
    """select distinct from join inner left right outer cross on as and or not is null in like
    between where group by having order asc desc limit offset count sum avg min max lower upper
    length abs round coalesce ifnull case when then else end cast true false exists union all""".split()
)
_TOK_RE = re.compile(
    r"'(?:[^']|'')*'|\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?|<=|>=|<>|!=|==|\S"
)


def tokenize(text: str) -> list[str]:
    """Lexical tokens of a unit (strings, numbers, possibly qualified names, operators)."""
    return _TOK_RE.findall(text)


def _slot(tok: str) -> str | None:
    if tok.startswith("'"):
        return "<str>"
    if tok[0].isdigit():
        return "<num>"
    if tok[0].isalpha() or tok[0] == "_":
        return None if tok.lower() in _KEYWORDS else "<id>"
    return None


@functools.lru_cache(maxsize=1 << 16)
def signature(unit_text: str) -> str:
    """Unit text with identifiers and literals masked (keywords kept, upper-cased)."""
    out = []
    for t in tokenize(unit_text):
        s = _slot(t)
        out.append(s if s is not None else (t.upper() if t.lower() in _KEYWORDS else t))
    return " ".join(out)


def transfer_edit(
    before: str,
    after: str,
    target: str,
    *,
    resolve: Callable[[str, dict[str, str]], str | None] | None = None,
) -> tuple[int, str] | None:
    """Carry the stored edit ``before → after`` onto a unit of ``target``.

    The first unit of ``target`` whose signature equals ``signature(before)``
    is rewritten: each masked token of ``before`` binds to the token at the
    same position in that unit (a token seen twice must bind consistently);
    ``after`` is re-written through the binding. Identifiers of ``after``
    that ``before`` does not contain are passed to ``resolve(token,
    binding)`` (e.g. a schema lookup of a foreign key); ``None`` from it, or
    no resolver, keeps the token as written.

    Returns:
      ``(unit_index, new_unit_text)`` or ``None`` when no unit matches.
    """
    try:
        target_units = units(target)
    except EditError:
        return None
    sig = signature(before)
    btoks = tokenize(before)
    atoks = tokenize(after)
    for i, u in enumerate(target_units):
        if signature(u.text) != sig:
            continue
        utoks = tokenize(u.text)
        if len(utoks) != len(btoks):
            continue
        binding: dict[str, str] = {}
        ok = True
        for b, t in zip(btoks, utoks):
            if _slot(b) is None:
                continue
            if binding.setdefault(b, t) != t:
                ok = False
                break
        if not ok:
            continue
        out = []
        for a in atoks:
            if a in binding:
                out.append(binding[a])
            elif _slot(a) == "<id>" and resolve is not None:
                r = resolve(a, binding)
                out.append(r if r is not None else a)
            else:
                out.append(a)
        return i, detokenize(out)
    return None


def detokenize(tokens: list[str]) -> str:
    """Join :func:`tokenize` tokens back into SQL text (no spaces around ``.``, inside parentheses, before ``,``)."""
    text = " ".join(tokens)
    text = re.sub(r"\s*\.\s*", ".", text)
    text = re.sub(r"(\w)\s+\(", r"\1(", text)
    text = re.sub(r"\(\s*", "(", text)
    text = re.sub(r"\s*\)", ")", text)
    text = re.sub(r"\s*,", ",", text)
    return text


# --------------------------------------------------------------------------- rule-based operators


class SchemaLike(Protocol):
    """What the rule operators need to know about a database schema."""

    def fk_between(self, child: str, parent: str) -> Any: ...  # object with ``.column`` or None

    def table(self, name: str) -> Any: ...  # object with ``.columns`` (``.name``, ``.nullable``)


def alias_map(sql: str) -> dict[str, str]:
    """alias (or bare table name) → table name, for FROM and JOIN sources."""
    return dict(_alias_map(sql))


@functools.lru_cache(maxsize=1 << 16)
def _alias_map(sql: str) -> tuple[tuple[str, str], ...]:
    tree = _parse(sql)
    out: dict[str, str] = {}
    for t in tree.find_all(exp.Table):
        out[t.alias_or_name] = t.name
        out[t.name] = t.name
    return tuple(out.items())


def _flip_cmp(node: exp.Expression) -> list[exp.Expression]:
    swaps = {exp.GT: exp.GTE, exp.GTE: exp.GT, exp.LT: exp.LTE, exp.LTE: exp.LT}
    cls = swaps.get(type(node))
    if cls is None:
        return []
    return [cls(this=node.this.copy(), expression=node.expression.copy())]


def _fk_join_fix(join: exp.Join, aliases: dict[str, str], schema: SchemaLike) -> list[str]:
    on = join.args.get("on")
    if not isinstance(on, exp.EQ) or not all(isinstance(x, exp.Column) for x in (on.this, on.expression)):
        return []
    a, b = on.this, on.expression
    out = []
    for left, right in ((a, b), (b, a)):
        lt, rt = aliases.get(left.table), aliases.get(right.table)
        if lt is None or rt is None:
            continue
        fk = schema.fk_between(lt, rt)
        if fk is not None and (left.name, right.name) != (fk.column, fk.ref_column):
            new = join.copy()
            new.set("on", exp.EQ(this=exp.column(fk.column, table=left.table),
                                 expression=exp.column(fk.ref_column, table=right.table)))
            out.append(new.sql(dialect=DIALECT))
    if (a.name, b.name) != ("id", "id"):
        new = join.copy()
        new.set("on", exp.EQ(this=exp.column("id", table=a.table), expression=exp.column("id", table=b.table)))
        out.append(new.sql(dialect=DIALECT))
    return out


def rule_edits(sql: str, schema: SchemaLike | None = None) -> list[tuple[int, str]]:
    """Rule-based one-unit edit operators for a failed SQL action (Module I).

    Operators (each changes one decision unit), in two groups. The *repair*
    operators come first, in this order: comparison inclusivity (``>`` ↔
    ``>=``, ``<`` ↔ ``<=``); ``= ''`` ↔ ``IS NULL``; case-insensitive string
    match (``col = 'X'`` → ``LOWER(col) = 'x'`` and back); DISTINCT on/off;
    ``COUNT(*)`` ↔ ``COUNT(col)`` over the nullable columns of the queried
    table; JOIN on the schema's foreign key ↔ on the two ids; ORDER BY
    direction; LIMIT ± 1.

    The *distractor* operators follow (:func:`distractor_edits`): plausible
    one-unit edits that a model or a mutation-style rule set also tries and
    that are usually wrong — SQL mutation operators in the sense of Tuya et
    al. (2007): a comparison mirrored (``>=`` → ``<=``) or negated (``>=`` →
    ``<``, ``=`` → ``<>``, ``IS NULL`` → ``IS NOT NULL``); a numeric literal
    of a comparison moved by one (for ``<``/``<=``/``>``/``>=`` only the
    direction that is *not* the same set as the inclusivity flip on
    integers: ``> n`` → ``> n+1``, ``>= n`` → ``>= n-1``, ``< n`` →
    ``< n-1``, ``<= n`` → ``<= n+1``; for ``=``/``<>`` both); a lower-case
    string literal title-cased (``city = 'porto'`` → ``city = 'Porto'``);
    ``AND`` ↔ ``OR`` inside one (parenthesised) conjunct; an aggregate
    swapped (``SUM`` ↔ ``AVG``, ``MIN`` ↔ ``MAX``); ``COUNT(col)`` ↔
    ``COUNT(DISTINCT col)``; ``COUNT(col)`` → ``COUNT(NULLIF(col, ''))``
    or ``COUNT(*) - COUNT(col)``; ``COUNT(*)`` → the same three over each
    nullable column, or ``COUNT(id)`` (with a schema that has a nullable
    column); a projected TEXT column case-folded with ``LOWER`` or
    ``UPPER`` (with a schema; for a one-column projection also with
    DISTINCT toggled: ``SELECT city`` → ``SELECT DISTINCT LOWER(city)``);
    ``JOIN`` ↔ ``LEFT JOIN``; a join on a column name both tables share
    other than ``id`` (NATURAL-JOIN style, with a schema); one key of a
    multi-key ORDER BY flipped. Distractors never repeat a repair edit, and they come *after*
    all repair edits, so the repair edits keep their positions (the SQL
    error model picks its ``count_column``, ``join_*`` and ``flip_order``
    slips from this list by position).

    Every edit changes exactly one unit, parses and differs from the
    original unit. The result is memoised per (action, schema object).

    Returns:
      ``(unit_index, replacement_text)`` pairs in a fixed order (the caller
      shuffles with its seed).
    """
    return list(_rule_edits(sql, _ByIdentity(schema)))


class _ByIdentity:
    """Hashes an environment object by identity (schemas are not hashable), for memoisation."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByIdentity) and other.obj is self.obj


@functools.lru_cache(maxsize=1 << 15)
def _rule_edits(sql: str, key: _ByIdentity) -> tuple[tuple[int, str], ...]:
    schema = key.obj
    try:
        tree = _parse(sql)
        aliases = alias_map(sql)
    except EditError:
        return ()
    base = [u.text for u in units(sql)]
    out = [(i, t) for i, t in _repair_edits(tree, aliases, schema) if t != base[i]]  # drop no-ops
    seen = set(out)
    for i, t in _distractor_candidates(_parse(sql), aliases, schema):
        if t == base[i] or (i, t) in seen:
            continue
        try:  # a distractor must be exactly one unit, parse and keep the unit kinds
            d = diff_units(sql, replace_unit(sql, i, t))
        except EditError:
            continue
        if d is None or d[0] != i:
            continue
        t = d[2].text  # the canonical print of the new unit
        if (i, t) not in seen:
            seen.add((i, t))
            out.append((i, t))
    return tuple(out)


def distractor_edits(sql: str, schema: SchemaLike | None = None) -> list[tuple[int, str]]:
    """The distractor part of :func:`rule_edits` (the edits after the repair operators')."""
    try:
        tree = _parse(sql)
        aliases = alias_map(sql)
    except EditError:
        return []
    repair = set(_repair_edits(tree, aliases, schema))
    return [e for e in rule_edits(sql, schema) if e not in repair]


def _repair_edits(tree: exp.Select, aliases: dict[str, str], schema: SchemaLike | None) -> list[tuple[int, str]]:
    """The repair operators of :func:`rule_edits` (no-ops not yet dropped)."""
    out: list[tuple[int, str]] = []
    for i, (kind, node) in enumerate(_unit_nodes(tree)):
        if kind == "select":
            exprs = list(tree.expressions)
            if not any(isinstance(e, exp.AggFunc) for e in exprs):
                flip = "" if tree.args.get("distinct") else "DISTINCT "
                cols = ", ".join(e.sql(dialect=DIALECT) for e in exprs)
                out.append((i, f"SELECT {flip}{cols}"))
            if len(exprs) == 1 and isinstance(exprs[0], exp.Count):
                inner = exprs[0].this
                if isinstance(inner, exp.Star) and schema is not None:
                    src = tree.args.get("from_") or tree.args.get("from")
                    tname = src.this.name if src is not None and isinstance(src.this, exp.Table) else None
                    try:
                        cols_ = schema.table(tname).columns if tname else ()
                    except KeyError:
                        cols_ = ()
                    for c in cols_:
                        if getattr(c, "nullable", False):
                            out.append((i, f"SELECT COUNT({c.name})"))
                elif not isinstance(inner, exp.Star):
                    out.append((i, "SELECT COUNT(*)"))
        elif kind == "join" and schema is not None:
            out.extend((i, t) for t in _fk_join_fix(node, aliases, schema))  # type: ignore[arg-type]
        elif kind in ("where", "having"):
            n = node  # type: ignore[assignment]
            out.extend((i, x.sql(dialect=DIALECT)) for x in _flip_cmp(n))
            if isinstance(n, exp.EQ) and isinstance(n.expression, exp.Literal) and n.expression.is_string:
                lit = n.expression.this
                if lit == "":
                    out.append((i, f"{n.this.sql(dialect=DIALECT)} IS NULL"))
                elif isinstance(n.this, exp.Lower):
                    out.append((i, f"{n.this.this.sql(dialect=DIALECT)} = '{lit}'"))
                else:
                    out.append((i, f"LOWER({n.this.sql(dialect=DIALECT)}) = '{lit.lower()}'"))
            if isinstance(n, exp.Is) and isinstance(n.expression, exp.Null):
                out.append((i, f"{n.this.sql(dialect=DIALECT)} = ''"))
        elif kind == "order":
            order = node.copy()  # type: ignore[union-attr]
            for o in order.expressions:
                desc = not o.args.get("desc")
                o.set("desc", desc)
                o.set("nulls_first", not desc)  # SQLite's default null order: no NULLS clause printed
            out.append((i, order.sql(dialect=DIALECT)))
        elif kind == "limit":
            lim = node.expression if isinstance(node, exp.Limit) else None  # type: ignore[union-attr]
            if isinstance(lim, exp.Literal) and lim.is_int:
                v = int(lim.this)
                out.extend((i, f"LIMIT {w}") for w in (v + 1, v - 1) if w >= 1)
    return out


# --------------------------------------------------------------------------- distractor operators

_MIRROR = {exp.GT: exp.LT, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.LTE: exp.GTE}
_NEGATE = {exp.GT: exp.LTE, exp.LTE: exp.GT, exp.LT: exp.GTE, exp.GTE: exp.LT, exp.EQ: exp.NEQ, exp.NEQ: exp.EQ}
#: literal shift of an inequality that is *not* equivalent (on integers) to the inclusivity flip
_SHIFT = {exp.GT: (1,), exp.GTE: (-1,), exp.LT: (-1,), exp.LTE: (1,), exp.EQ: (1, -1), exp.NEQ: (1, -1)}
_AGG_SWAP = {exp.Sum: exp.Avg, exp.Avg: exp.Sum, exp.Min: exp.Max, exp.Max: exp.Min}


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect=DIALECT)


def _predicate_distractors(n: exp.Expression) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    bare = n.this if isinstance(n, exp.Paren) else n
    cls = type(bare)
    if cls in _MIRROR:
        out.append(_MIRROR[cls](this=bare.this.copy(), expression=bare.expression.copy()))
    if cls in _NEGATE:
        out.append(_NEGATE[cls](this=bare.this.copy(), expression=bare.expression.copy()))
    if cls in _SHIFT:
        lit = bare.expression
        if isinstance(lit, exp.Literal) and lit.is_int:
            for d in _SHIFT[cls]:
                v = int(lit.this) + d
                if v >= 0:
                    out.append(cls(this=bare.this.copy(), expression=exp.Literal.number(v)))
        if cls is exp.EQ and isinstance(lit, exp.Literal) and lit.is_string and not isinstance(bare.this, exp.Lower):
            s = lit.this
            if s and s == s.lower() and s.title() != s:
                out.append(exp.EQ(this=bare.this.copy(), expression=exp.Literal.string(s.title())))
    if isinstance(bare, exp.Is) and isinstance(bare.expression, exp.Null):
        out.append(exp.Not(this=bare.copy()))
    if isinstance(bare, exp.Not) and isinstance(bare.this, exp.Is) and isinstance(bare.this.expression, exp.Null):
        out.append(bare.this.copy())
    if isinstance(bare, (exp.And, exp.Or)):
        other = exp.Or if isinstance(bare, exp.And) else exp.And
        out.append(exp.Paren(this=other(this=bare.this.copy(), expression=bare.expression.copy())))
    return out


def _agg_distractors(node: exp.Expression) -> list[exp.Expression]:
    """Copies of ``node`` with one aggregate swapped (SUM↔AVG, MIN↔MAX, COUNT(c)↔COUNT(DISTINCT c))."""
    out: list[exp.Expression] = []
    for k, agg in enumerate(list(node.find_all(exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count))):
        if isinstance(agg, exp.Count):
            inner = agg.this
            if isinstance(inner, exp.Column):
                new: exp.Expression = exp.Count(this=exp.Distinct(expressions=[inner.copy()]))
            elif isinstance(inner, exp.Distinct) and len(inner.expressions) == 1:
                new = exp.Count(this=inner.expressions[0].copy())
            else:
                continue
        else:
            new = _AGG_SWAP[type(agg)](this=agg.this.copy())
        copy_ = node.copy()
        target = list(copy_.find_all(exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count))[k]
        if target is copy_:
            copy_ = new
        else:
            target.replace(new)
        out.append(copy_)
    return out


def _table_columns(schema: SchemaLike | None, table: str | None) -> tuple:
    if schema is None or table is None:
        return ()
    try:
        return tuple(schema.table(table).columns)
    except KeyError:
        return ()


def _from_table(tree: exp.Select) -> str | None:
    src = tree.args.get("from_") or tree.args.get("from")
    return src.this.name if src is not None and isinstance(src.this, exp.Table) else None


def _text_column(col: exp.Column, tree: exp.Select, aliases: dict[str, str], schema: SchemaLike | None) -> bool:
    table = aliases.get(col.table) if col.table else _from_table(tree)
    return any(c.name == col.name and str(getattr(c, "type", "")).upper() == "TEXT"
               for c in _table_columns(schema, table))


def _projection_distractors(tree: exp.Select, aliases: dict[str, str], schema: SchemaLike | None) -> list[str]:
    exprs = list(tree.expressions)
    distinct = bool(tree.args.get("distinct"))

    def text(items: list[exp.Expression], dist: bool = distinct) -> str:
        return ("SELECT DISTINCT " if dist else "SELECT ") + ", ".join(_sql(e) for e in items)

    out = []
    for j, e in enumerate(exprs):
        for new in _agg_distractors(e):
            out.append(text(exprs[:j] + [new] + exprs[j + 1:]))
    if len(exprs) == 1 and isinstance(exprs[0], exp.Count):
        inner = exprs[0].this
        cols = _table_columns(schema, _from_table(tree))
        nullable = [c.name for c in cols if getattr(c, "nullable", False)]
        if isinstance(inner, exp.Star) and nullable:
            # (only with a nullable column: the error model's count_column slip takes the first
            # ``SELECT COUNT(`` edit, which must stay the repair edit COUNT(<nullable column>))
            for c in nullable:
                out += [f"SELECT COUNT(DISTINCT {c})", f"SELECT COUNT(NULLIF({c}, ''))", f"SELECT COUNT(*) - COUNT({c})"]
            out += [f"SELECT COUNT({c.name})" for c in cols if c.name == "id"]
        elif isinstance(inner, exp.Column):
            c = _sql(inner)
            out += [f"SELECT COUNT(NULLIF({c}, ''))", f"SELECT COUNT(*) - COUNT({c})"]
    for j, e in enumerate(exprs):
        if isinstance(e, exp.Column) and _text_column(e, tree, aliases, schema):
            for fold in (exp.Lower, exp.Upper):
                out.append(text(exprs[:j] + [fold(this=e.copy())] + exprs[j + 1:]))
                if len(exprs) == 1:  # de-duplicating case variants: DISTINCT toggled with the fold
                    out.append(text([fold(this=e.copy())], not distinct))
    return out


def _join_distractors(join: exp.Join, aliases: dict[str, str], schema: SchemaLike | None) -> list[str]:
    out = []
    j = join.copy()
    if join.args.get("side") is None and not join.args.get("kind"):
        j.set("side", "LEFT")
        out.append(_sql(j))
    elif str(join.args.get("side") or "").upper() == "LEFT":
        j.set("side", None)
        j.set("kind", None)
        out.append(_sql(j))
    on = join.args.get("on")
    if isinstance(on, exp.EQ) and all(isinstance(x, exp.Column) and x.table for x in (on.this, on.expression)):
        a, b = on.this, on.expression
        bcols = {c.name for c in _table_columns(schema, aliases.get(b.table))}
        for c in _table_columns(schema, aliases.get(a.table)):
            if c.name != "id" and c.name in bcols and (a.name, b.name) != (c.name, c.name):
                new = join.copy()
                new.set("on", exp.EQ(this=exp.column(c.name, table=a.table),
                                     expression=exp.column(c.name, table=b.table)))
                out.append(_sql(new))
    return out


def _order_distractors(order: exp.Order) -> list[str]:
    out = []
    keys = order.expressions
    if len(keys) >= 2:
        for k in range(len(keys)):
            new = order.copy()
            o = new.expressions[k]
            desc = not o.args.get("desc")
            o.set("desc", desc)
            o.set("nulls_first", not desc)
            out.append(_sql(new))
    return out


def _distractor_candidates(tree: exp.Select, aliases: dict[str, str], schema: SchemaLike | None
                           ) -> list[tuple[int, str]]:
    """Candidate distractor edits in unit order (validated and de-duplicated by :func:`_rule_edits`)."""
    out: list[tuple[int, str]] = []
    for i, (kind, node) in enumerate(_unit_nodes(tree)):
        if kind == "select":
            out.extend((i, t) for t in _projection_distractors(tree, aliases, schema))
        elif kind == "join":
            out.extend((i, t) for t in _join_distractors(node, aliases, schema))  # type: ignore[arg-type]
        elif kind in ("where", "having"):
            out.extend((i, _sql(x)) for x in _predicate_distractors(node))  # type: ignore[arg-type]
            if kind == "having":
                out.extend((i, _sql(x)) for x in _agg_distractors(node))  # type: ignore[arg-type]
        elif kind == "order":
            out.extend((i, t) for t in _order_distractors(node))  # type: ignore[arg-type]
    return out


def _resolver(aliases: dict[str, str], schema: SchemaLike | None):
    """Adapt identifiers of a stored edit that the new action does not bind:
    a qualified foreign-key column is looked up in the schema for the two
    tables the new join connects; a bare column must exist in the queried
    table, else the table's first nullable column stands in."""

    def resolve(token: str, binding: dict[str, str]) -> str | None:
        if schema is None:
            return None
        if "." in token:
            qual, col = token.split(".", 1)
            mine = next((v.split(".", 1)[0] for k, v in binding.items() if "." in k and k.split(".", 1)[0] == qual), None)
            other = next((v.split(".", 1)[0] for k, v in binding.items() if "." in k and k.split(".", 1)[0] != qual), None)
            if mine is None or other is None:
                return None
            child, parent = aliases.get(mine), aliases.get(other)
            if child is None or parent is None:
                return None
            fk = schema.fk_between(child, parent)
            return f"{mine}.{fk.column}" if fk is not None else None
        tables = [t for a, t in aliases.items() if a == t]
        for tname in tables:
            try:
                cols = schema.table(tname).columns
            except KeyError:
                continue
            if any(c.name == token for c in cols):
                return token
            nullable = [c.name for c in cols if getattr(c, "nullable", False)]
            if nullable:
                return nullable[0]
        return None

    return resolve


class SQLEdits(EditModel):
    """SQL decision units through :mod:`cfjax.domains.sql.edits` (``env`` = a schema)."""

    name = "sql"

    def units(self, action: str) -> list[Unit]:
        return units(action)

    def replace_unit(self, action: str, index: int, new_text: str) -> str:
        return replace_unit(action, index, new_text)

    def signature(self, unit_text: str) -> str:
        return signature(unit_text)

    def normalize(self, action: str) -> str:
        return normalize(action)

    def rule_edits(self, action: str, env: Any = None) -> list[tuple[int, str]]:
        return rule_edits(action, env)

    def transfer(self, before: str, after: str, target: str, env: Any = None) -> str | None:
        try:
            aliases = alias_map(target)
        except EditError:
            return None
        moved = transfer_edit(before, after, target, resolve=_resolver(aliases, env))
        if moved is None:
            return None
        i, new = moved
        try:
            return replace_unit(target, i, new)
        except EditError:
            return None
