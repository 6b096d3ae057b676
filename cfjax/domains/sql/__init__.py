"""The sql domain: world model, edit model, suite, scripted error model (see ``suite.py``)."""

from cfjax.domains.sql.suite import *  # noqa: F401,F403
from cfjax.domains.sql.suite import __all__  # noqa: F401
