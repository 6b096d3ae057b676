"""Issue 21, item 5: a domain declares itself (cfjax.types.DomainInfo in its folder, registered in
cfjax.registry.DOMAINS), and everything that used to name the built-in domains reads the registry."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from cfjax.registry import DOMAINS
from cfjax.types import DomainInfo, Language, Task
from tests.domains import contract


def test_the_built_in_domains_are_registered_with_their_declarations():
    assert DOMAINS.names()[:3] == ("sql", "pybugs", "sat")
    sql, py, sat = (DOMAINS.get(n) for n in ("sql", "pybugs", "sat"))
    assert all(isinstance(i, DomainInfo) for i in (sql, py, sat))
    assert (sql.suite, py.suite, sat.suite) == ("cfjax.domains.sql:SQLSuite", "cfjax.domains.python:PyBugsSuite",
                                                "cfjax.domains.sat:SATSuite")
    assert (set(sql.languages), set(py.languages), set(sat.languages)) == ({"sql"}, {"python"}, {"sat", "smt"})
    assert (sql.untrusted_code, py.untrusted_code, sat.untrusted_code) == (False, True, False)
    assert (sql.k_cap, py.k_cap, sat.k_cap) == (5, 3, 5)  # UpliftMem's K: ALFWorld/WebShop 5, code 3
    assert py.utility == {"gamma": 0.2, "rho": 1.0, "c_max": 600.0, "cost": "memory_tokens"}
    assert sql.utility == sat.utility == {"gamma": 0.2, "rho": 1.0, "c_max": 2.0, "cost": "attempts"}
    import cfjax.domains.python
    import cfjax.domains.sat
    import cfjax.domains.sql

    assert (cfjax.domains.sql.INFO, cfjax.domains.python.INFO, cfjax.domains.sat.INFO) == (sql, py, sat)


@pytest.mark.parametrize("name", DOMAINS.names())
def test_every_registered_domain_declares_a_usable_info(name):
    contract.check_info(name)


@pytest.mark.parametrize("name", DOMAINS.names())
def test_every_registered_domain_uses_only_languages_it_declares(name, tmp_path_factory):
    from cfjax.domains import build_suite

    contract.check_languages(build_suite(name, tmp_path_factory.mktemp(name)))


@pytest.mark.parametrize("name", DOMAINS.names())
def test_every_registered_world_scores_malformed_actions_zero(name, tmp_path_factory):
    from cfjax.domains import build_suite

    contract.check_bad_actions(build_suite(name, tmp_path_factory.mktemp(name)))


def test_the_constants_are_those_of_before_the_registry():
    """Results stay bit-identical: the utility constants and K the configs give every suite are the
    values UtilitySection / RetrievalSection held per suite before the domains declared them."""
    from cfjax.config.uplift import RetrievalSection, UtilitySection, UtilitySpec

    u = UtilitySection()
    assert u.get("sql") == u.get("sat") == UtilitySpec()
    assert u.get("pybugs") == UtilitySpec(c_max=600.0, cost="memory_tokens")
    assert u.get("memsyco") == UtilitySpec(c_max=800.0, cost="memory_tokens")
    assert u.get("synthetic") == UtilitySpec(gamma=0.0)
    with pytest.raises(ValueError, match="no utility constants for domain 'nope'.*sql, pybugs, sat"):
        u.get("nope")
    r = RetrievalSection()
    assert [r.k_for(x) for x in ("sql", "python", "sat", "smt", "pybugs", "memsyco")] == [5, 3, 5, 5, 3, 5]


@dataclasses.dataclass(frozen=True)
class _ToySuite:
    name = "toy"


TOY = DomainInfo(name="toy", suite="tests.domains.test_domain_registry:_ToySuite",
                 languages={"toylang": Language("You are an agent that writes toy programs.", "program", "toy")},
                 untrusted_code=True, utility={"gamma": 0.5, "c_max": 9.0}, k_cap=2,
                 cost_weights={"antipersist": 7.0}, description="a throwaway domain")


@pytest.fixture
def toy():
    DOMAINS.register("toy", TOY)
    try:
        yield TOY
    finally:
        DOMAINS.unregister("toy")


def test_a_registered_domain_is_picked_up_everywhere(toy):
    """One registration, no other edit: suites, --suite help, the sandbox policy, the prompts, UpliftMem's
    constants and K, the job-cost weights."""
    from cfjax import cli
    from cfjax.config.uplift import RetrievalSection, UtilitySection, UtilitySpec
    from cfjax.domains import SUITES, _cls, cost_weight
    from cfjax.llm import prompts
    from cfjax.types import DraftRequest

    assert "toy" in SUITES and SUITES["toy"] == TOY.suite and list(SUITES)[-1] == "toy"
    assert _cls("toy").__qualname__ == "_ToySuite"  # imported from its "module:Class"
    assert "| toy | all | jsonl:PATH" in cli._suite_help("all")
    assert cli._runs_model_code("toy") and not cli._runs_model_code("sql") and cli._runs_model_code("pybugs")
    text = prompts.render_draft(DraftRequest(Task("toy/1", "q", "env", "ctx", domain="toylang")))
    assert text.startswith("You are an agent that writes toy programs.") and "```toy\n<your program>" in text
    assert prompts.format_action(" p ", "toylang") == "ACTION:\n```toy\np\n```"
    assert UtilitySection().get("toy") == UtilitySpec(gamma=0.5, c_max=9.0)
    assert RetrievalSection().k_for("toy") == RetrievalSection().k_for("toylang") == 2
    assert RetrievalSection(k_cap={"toy": 4}).k_for("toylang") == 4
    assert cost_weight("toy", "antipersist") == 7.0 and cost_weight("toy", "upliftmem") == 2.0
    assert cost_weight("sat", "antipersist") == 4.0 and cost_weight("jsonl-mine", "antipersist") == 2.0


def test_sandbox_policy_reads_the_domain_declaration():
    from cfjax import cli

    assert [cli._runs_model_code(s) for s in ("sql", "pybugs", "sat", "jsonl-unregistered")] == [False, True, False,
                                                                                                 False]
    cli._check_sandbox(argparse.Namespace(backbone="scripted", allow_weak_sandbox=False), ["pybugs"])  # no-op


def test_cli_suite_help_lists_the_registered_suites():
    from cfjax.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    run = next(a for a in sub.choices["countermem"]._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    suite = next(a for a in run._actions if "--suite" in a.option_strings)
    # the text of before the registry, with the registered suites (sql | pybugs | sat, then any plugin's)
    assert suite.help == (" | ".join(DOMAINS.names()) + " | all | jsonl:PATH (your own tasks; README, "
                          "'Bring your own tasks') (default: all)")
