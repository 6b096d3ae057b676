"""The math domain: formal proofs checked by Coq's kernel (see ``suite.py``).

The domain declares itself here (:data:`INFO`, registered in :data:`cfjax.registry.DOMAINS`):
prompts, the CLI, configs and runners read it and never name the domain. It needs Coq
(``apt-get install coq`` on Debian/Ubuntu; ``cfjax doctor`` reports it); without it ``--suite all``
skips it with one line saying so.
"""

from cfjax.registry import DOMAINS
from cfjax.types import DomainInfo, Language

#: what the math domain declares about itself (its action language, UpliftMem's constants)
INFO = DomainInfo(
    name="math",
    suite="cfjax.domains.math:MathSuite",
    languages={"coq": Language(system="You are an agent that writes proofs in Coq: the tactic sentences of a "
                                      "proof, which Coq's kernel checks.", noun="proof", fence="coq")},
    untrusted_code=True,  # a proof script is run by Coq under the sandbox's OS layers
    # Eq. 1: evaluated attempts are the cost (C_max = the attempt limit, 2), like the other domains
    utility={"gamma": 0.2, "rho": 1.0, "c_max": 2.0, "cost": "attempts"},
    k_cap=5,
    cost_weights={"antipersist": 2.0, "upliftmem": 2.0},
    description="formal proofs (miniF2F-style, nat / Z / lists) checked by Coq's kernel",
    system_check="cfjax.domains.math.kernel:system_check",
)
DOMAINS.register(INFO.name, INFO)

from cfjax.domains.math.suite import *  # noqa: E402,F401,F403
from cfjax.domains.math.suite import __all__ as _suite_all  # noqa: E402

__all__ = ["INFO", *_suite_all]
