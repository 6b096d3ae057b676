"""The python domain: world model, edit model, suite, scripted error model (see ``suite.py``)."""

from cfjax.domains.python.suite import *  # noqa: F401,F403
from cfjax.domains.python.suite import __all__  # noqa: F401
