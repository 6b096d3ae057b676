"""The sat domain: world model, edit model, suite, scripted error model (see ``suite.py``).

The domain declares itself here (:data:`INFO`, registered in :data:`cfjax.registry.DOMAINS`):
prompts, the CLI, configs and runners read it and never name the domain.
"""

from cfjax.registry import DOMAINS
from cfjax.types import DomainInfo, Language

#: what the sat domain declares about itself (its two action languages, UpliftMem's constants)
INFO = DomainInfo(
    name="sat",
    suite="cfjax.domains.sat:SATSuite",
    languages={
        "sat": Language(system="You are an agent that writes propositional encodings of combinatorial problems in "
                               "the cfjax constraint language, one constraint group per line; a SAT solver solves "
                               "them.", noun="encoding", fence="text"),
        "smt": Language(system="You are an agent that writes SMT-LIB 2 encodings (QF_LIA) of scheduling and "
                               "arithmetic problems, one assertion per line; an SMT solver solves them.",
                        noun="encoding", fence="smt2"),
    },
    untrusted_code=False,  # an encoding is parsed and handed to a solver, never executed as code
    # Eq. 1: evaluated attempts are the cost (C_max = the attempt limit, 2), like the paper's action counts
    utility={"gamma": 0.2, "rho": 1.0, "c_max": 2.0, "cost": "attempts"},
    k_cap=5,  # UpliftMem's K (ALFWorld/WebShop: 5)
    # relative cost of one job of each runner (measured on the reference machine; longest-first submission)
    cost_weights={"antipersist": 4.0, "upliftmem": 2.0},
    description="SAT and SMT (QF_LIA) encodings of combinatorial and scheduling problems",
)
DOMAINS.register(INFO.name, INFO)

from cfjax.domains.sat.suite import *  # noqa: E402,F401,F403
from cfjax.domains.sat.suite import __all__ as _suite_all  # noqa: E402

__all__ = ["INFO", *_suite_all]
