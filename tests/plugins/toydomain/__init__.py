"""A test-only domain, ``toylist``, defined outside ``cfjax`` (issue 21, "plugin proof").

Integer-list pipelines (``filter x >= 5`` / ``sort desc`` / ``take 3`` / ``sum``, one step per line)
evaluated by a real evaluator (:mod:`tests.plugins.toydomain.lang`), one-step edits, a suite of 140
tasks over five lists with base / look-alike / new-surface variants and a held-out list, and a
:class:`~cfjax.domains.base.KeyedErrorModel` for the scripted backbone. Importing this package
registers it — the one registration — and nothing in ``cfjax`` names it.
"""

from cfjax.registry import DOMAINS
from cfjax.types import DomainInfo, Language

#: what the toylist domain declares about itself
INFO = DomainInfo(
    name="toylist",
    suite="tests.plugins.toydomain.suite:ToyListSuite",
    languages={"toylist": Language(
        system="You are an agent that writes pipelines over a list of integers in the toylist language, one "
               "step per line; an evaluator runs them.", noun="pipeline", fence="text")},
    untrusted_code=False,  # a pipeline is parsed and interpreted step by step, never executed as code
    utility={"gamma": 0.2, "rho": 1.0, "c_max": 2.0, "cost": "attempts"},
    k_cap=5,
    cost_weights={"antipersist": 1.0, "upliftmem": 1.0},
    description="toylist: integer-list pipelines (a test-only plugin domain)",
)
DOMAINS.register(INFO.name, INFO)

from tests.plugins.toydomain.suite import ToyListSuite, ToyListWorld  # noqa: E402

__all__ = ["INFO", "ToyListSuite", "ToyListWorld"]
