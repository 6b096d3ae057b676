"""The sql domain: world model, edit model, suite, scripted error model (see ``suite.py``).

The domain declares itself here (:data:`INFO`, registered in :data:`cfjax.registry.DOMAINS`):
prompts, the CLI, configs and runners read it and never name the domain.
"""

from cfjax.registry import DOMAINS
from cfjax.types import DomainInfo, Language

#: what the sql domain declares about itself (its action language, UpliftMem's constants)
INFO = DomainInfo(
    name="sql",
    suite="cfjax.domains.sql:SQLSuite",
    languages={"sql": Language(system="You are an agent that writes SQL queries for SQLite databases.",
                               noun="query", fence="sql")},
    untrusted_code=False,  # a query runs in SQLite on a private in-memory copy (its own worker), not as OS code
    # Eq. 1: evaluated attempts are the cost (C_max = the attempt limit, 2), like the paper's action counts
    utility={"gamma": 0.2, "rho": 1.0, "c_max": 2.0, "cost": "attempts"},
    k_cap=5,  # UpliftMem's K (ALFWorld/WebShop: 5)
    # relative cost of one job of each runner (measured on the reference machine; longest-first submission)
    cost_weights={"antipersist": 1.0, "upliftmem": 1.0},
    description="text-to-SQL on generated SQLite databases",
)
DOMAINS.register(INFO.name, INFO)

from cfjax.domains.sql.suite import *  # noqa: E402,F401,F403
from cfjax.domains.sql.suite import __all__ as _suite_all  # noqa: E402

__all__ = ["INFO", *_suite_all]
