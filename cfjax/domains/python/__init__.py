"""The python domain: world model, edit model, suite, scripted error model (see ``suite.py``).

The domain declares itself here (:data:`INFO`, registered in :data:`cfjax.registry.DOMAINS`):
prompts, the CLI, configs and runners read it and never name the domain.
"""

from cfjax.registry import DOMAINS
from cfjax.types import DomainInfo, Language

#: what the pybugs domain declares about itself (its action language, UpliftMem's constants)
INFO = DomainInfo(
    name="pybugs",
    suite="cfjax.domains.python:PyBugsSuite",
    languages={"python": Language(system="You are an agent that repairs Python functions so that their unit tests "
                                         "pass. The action is the complete source of the function.",
                                  noun="function", fence="python")},
    untrusted_code=True,  # the world runs the model's function: the CLI requires the OS sandbox (cfjax.sandbox)
    # Eq. 1: injected memory tokens are the cost, like BigCodeBench (C_max = 600 ≈ three typical memories)
    utility={"gamma": 0.2, "rho": 1.0, "c_max": 600.0, "cost": "memory_tokens"},
    k_cap=3,  # UpliftMem's K for code (BigCodeBench: 3)
    # relative cost of one job of each runner (measured on the reference machine; longest-first submission)
    cost_weights={"antipersist": 2.0, "upliftmem": 3.0},
    description="repair Python functions until their unit tests pass (runs model code)",
)
DOMAINS.register(INFO.name, INFO)

from cfjax.domains.python.suite import *  # noqa: E402,F401,F403
from cfjax.domains.python.suite import __all__ as _suite_all  # noqa: E402

__all__ = ["INFO", *_suite_all]
