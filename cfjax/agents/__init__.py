"""Base agents: an axis of every runner, not a row (shared/DESIGN.md, "Base agents").

A base agent is how the model is driven *within* one task, beneath whatever memory a row adds across
tasks. Every runner builds its backbone through :class:`cfjax.experiments.backbones.BackboneSpec`,
whose ``agent`` names one of :data:`cfjax.registry.AGENTS`; the agent's :attr:`BaseAgent.wrap` turns
the plain backbone into the agent's backbone, so the one agent loop (:mod:`cfjax.loop`), every row and
every runner stay unchanged:

* ``react`` — ReAct (Yao et al., ICLR 2023) as the loop already runs it: draft → evaluate → the next
  attempt sees the history and the evaluator's feedback. ``wrap`` is the identity.
* ``reflexion`` — Reflexion (Shinn et al., NeurIPS 2023): after a failed attempt the backbone writes a
  verbal self-reflection from the attempt and its feedback; the last three stay in the draft's context
  for the next attempts of the same task; nothing crosses tasks (:mod:`cfjax.agents.reflexion`).

``cfjax countermem run --agent react reflexion`` runs both (Table 1 per agent); ``antipersist run``,
``upliftmem run`` and ``compare`` take one ``--agent``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cfjax.agents.reflexion import (REFLECT, ReflectRequest, ReflectResult, ReflexionBackbone, parse_reflection,
                                    render_reflect)
from cfjax.registry import AGENTS
from cfjax.types import Backbone

__all__ = ["BaseAgent", "REACT", "REFLEXION", "REFLECT", "ReflectRequest", "ReflectResult", "ReflexionBackbone",
           "parse_reflection", "render_reflect"]


@dataclass(frozen=True)
class BaseAgent:
    """One base agent (registered in :data:`cfjax.registry.AGENTS`).

    Attributes:
      name: the ``--agent`` value (``"react"``).
      title: how reports name it (``"ReAct"``).
      wrap: ``backbone → backbone``: the agent's backbone over a plain one (must be picklable: a
        module-level function).
      description: one line for listings.
      paper: where it comes from.
    """

    name: str
    title: str
    wrap: Callable[[Backbone], Backbone]
    description: str = ""
    paper: str = ""


def _identity(backbone: Backbone) -> Backbone:
    return backbone


def _reflexion(backbone: Backbone) -> Backbone:
    return ReflexionBackbone(backbone)


#: ReAct: the loop as it is (draft → evaluate → the next draft sees history and feedback)
REACT: BaseAgent = AGENTS.register("react", BaseAgent(
    "react", "ReAct", _identity,
    "draft → evaluate; the next attempt sees the earlier attempts and the evaluator's feedback",
    "Yao et al., ReAct (ICLR 2023)"))

#: Reflexion: a self-reflection per failed attempt, the last 3 in context, within the task only
REFLEXION: BaseAgent = AGENTS.register("reflexion", BaseAgent(
    "reflexion", "Reflexion", _reflexion,
    "ReAct plus a verbal self-reflection after each failed attempt; the last 3 stay in context within the task",
    "Shinn et al., Reflexion (NeurIPS 2023)"))
