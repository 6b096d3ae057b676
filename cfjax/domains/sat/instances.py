"""The environments of the SAT/SMT suite: two maps, two rosters, two project schedules.

Each environment is an *instance* of a combinatorial problem. SAT instances
(:class:`~cfjax.domains.sat.sat_world.SATInstance`) declare the index sets and the
boolean variables an encoding may use; SMT instances
(:class:`~cfjax.domains.sat.smt_world.SMTInstance`) declare jobs, durations and the
schedule window, from which the world declares ``s_<job>``/``e_<job>``.
The two environments of a problem type use *different* set, variable and
element names, so a correction carried from one to the other must rebind
every identifier. :func:`context_text` renders what the agent sees.
"""

from __future__ import annotations

from cfjax.domains.sat.sat_world import SATInstance
from cfjax.domains.sat.smt_world import SMTInstance

__all__ = ["INSTANCES", "context_text", "SAT_LANGUAGE", "SMT_LANGUAGE"]


def _grid_map() -> SATInstance:
    regions = ("alder", "birch", "cedar", "dogwood", "elm", "fir", "gum", "hazel", "ivy")
    borders = (("alder", "birch"), ("birch", "cedar"), ("dogwood", "elm"), ("elm", "fir"), ("gum", "hazel"),
               ("hazel", "ivy"), ("alder", "dogwood"), ("dogwood", "gum"), ("birch", "elm"), ("elm", "hazel"),
               ("cedar", "fir"), ("fir", "ivy"), ("alder", "elm"), ("cedar", "elm"), ("elm", "gum"), ("elm", "ivy"))
    return SATInstance(
        "graph_a", "colouring",
        sets={"REGIONS": regions, "COLOURS": ("red", "green", "blue", "yellow"), "BORDERS": borders},
        vars={"x": ("REGIONS", "COLOURS")},
        description="Map A: nine city districts laid out as a 3×3 grid around the central district elm, "
                    "which borders every other district.",
        data={"var": "x", "regions": "REGIONS", "colours": "COLOURS", "borders": "BORDERS",
              "var_doc": "x[v,c]: region v is painted colour c"})


def _ladder_map() -> SATInstance:
    provs = ("arno", "brie", "cala", "doro", "enna", "faro", "gela", "iseo", "lodi", "mola")
    nb = (("arno", "brie"), ("brie", "cala"), ("cala", "doro"), ("doro", "enna"), ("enna", "arno"),
          ("faro", "gela"), ("gela", "iseo"), ("iseo", "lodi"), ("lodi", "mola"),
          ("arno", "faro"), ("brie", "gela"), ("cala", "iseo"), ("doro", "lodi"), ("enna", "mola"),
          ("cala", "gela"))
    return SATInstance(
        "graph_b", "colouring",
        sets={"PROVINCES": provs, "PAINTS": ("amber", "teal", "violet"), "NEIGHBOURS": nb},
        vars={"paint": ("PROVINCES", "PAINTS")},
        description="Map B: ten provinces; an inner ring of five (arno, brie, cala, doro, enna) and an outer "
                    "chain of five (faro … mola), each outer province next to one inner province.",
        data={"var": "paint", "regions": "PROVINCES", "colours": "PAINTS", "borders": "NEIGHBOURS",
              "var_doc": "paint[v,k]: province v is painted k"})


def _roster(env_id: str, staff: tuple[str, ...], days: tuple[str, ...], parts: tuple[str, ...], staff_set: str,
            var: str, desc: str) -> SATInstance:
    shifts = tuple(f"{d}_{p}" for d in days for p in parts)
    return SATInstance(
        env_id, "roster",
        sets={staff_set: staff, "DAYS": days, "SHIFTS": shifts},
        families={"SHIFTS_ON": {d: tuple(f"{d}_{p}" for p in parts) for d in days}},
        vars={var: (staff_set, "SHIFTS")},
        description=desc,
        data={"var": var, "staff": staff_set, "shifts": "SHIFTS", "days": "DAYS", "shifts_on": "SHIFTS_ON",
              "var_doc": f"{var}[p,s]: {'staff member' if staff_set == 'STAFF' else 'nurse'} p works shift s"})


INSTANCES: tuple[SATInstance | SMTInstance, ...] = (
    _grid_map(),
    _ladder_map(),
    _roster("roster_a", ("ann", "ben", "cat", "dan", "eve", "fay"), ("mon", "tue", "wed", "thu"), ("am", "pm"),
            "STAFF", "w", "Roster A: six staff of a pharmacy, four days with a morning (am) and an afternoon (pm) "
                          "shift each."),
    _roster("roster_b", ("gus", "hal", "ida", "jon", "kim", "lea", "max"), ("fri", "sat", "sun"),
            ("early", "late", "night"), "NURSES", "on",
            "Roster B: seven nurses of a ward over a weekend, three shifts (early, late, night) a day."),
    SMTInstance("project_a", "schedule",
                (("dig", 3), ("pour", 2), ("frame", 4), ("wire", 2), ("plumb", 3), ("roof", 3), ("paint", 2),
                 ("clean", 1)), 14,
                "Project A: building a small house; eight jobs inside a 14-day window."),
    SMTInstance("project_b", "schedule",
                (("spec", 2), ("design", 3), ("code", 4), ("test", 2), ("docs", 3), ("review", 1), ("deploy", 2),
                 ("train", 2)), 12,
                "Project B: a software release; eight jobs inside a 12-day window."),
)

SAT_LANGUAGE = """\
Language (one constraint group per line; '#' starts a comment):
  [each BINDINGS:] exactly|atleast|atmost|morethan|lessthan K of LIT, LIT, ... [for BINDINGS]
  [each BINDINGS:] LIT | LIT | ...          (a clause: at least one literal holds)
  [each BINDINGS:] LIT & ... => LIT | ...   (an implication)
  LIT := VAR[i,j] or ~VAR[i,j]; an index is a bound name or an element
  BINDING := name in SET | (a,b) in PAIRS | name in FAMILY[key] | name in {e1, e2, ...}
  morethan K = atleast K+1; lessthan K = atmost K-1"""

SMT_LANGUAGE = """\
; Language: SMT-LIB 2, logic QF_LIA; write one (assert ...) per line.
; The environment declares the variables below and asserts, for every job j,
; e_j = s_j + duration(j), s_j >= 0 and e_j <= the window end; do not redeclare them with other sorts.
; Allowed commands: declare-const / declare-fun with no arguments (Int, Bool), assert, check-sat, get-model.
; Glossary: "X follows Y" means X starts at or after the end of Y (s_X >= e_Y);
; "X arrives on day R" means X starts on day R or later (s_X >= R)."""


def _fmt(e) -> str:
    return "(" + ",".join(e) + ")" if isinstance(e, tuple) else e


def context_text(inst: SATInstance | SMTInstance) -> str:
    """The environment context shown to the agent: the instance, its declarations, the language."""
    if isinstance(inst, SMTInstance):
        lines = [f"; environment {inst.env_id} (schedule): {inst.description}",
                 "; jobs (duration in days): " + ", ".join(f"{j} {d}" for j, d in inst.jobs),
                 f"; schedule window: days 0..{inst.horizon} (every job starts on day 0 or later and ends by day "
                 f"{inst.horizon})"]
        for j, d in inst.jobs:
            lines.append(f"(declare-const s_{j} Int) ; start day of {j}")
            lines.append(f"(declare-const e_{j} Int) ; end day of {j} = s_{j} + {d}")
        return "\n".join(lines) + "\n" + SMT_LANGUAGE
    lines = [f"# environment {inst.env_id} ({inst.problem}): {inst.description}", "Sets:"]
    for name, elems in inst.sets.items():
        lines.append(f"  {name} = {{{', '.join(_fmt(e) for e in elems)}}}")
    for name, fam in inst.families.items():
        for key, elems in fam.items():
            lines.append(f"  {name}[{key}] = {{{', '.join(_fmt(e) for e in elems)}}}")
    lines.append("Variables:")
    for v, doms in inst.vars.items():
        lines.append(f"  {v} indexed by [{', '.join(doms)}] — {inst.data.get('var_doc', '')}")
    return "\n".join(lines) + "\n" + SAT_LANGUAGE
