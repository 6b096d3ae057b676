"""Voyager's skill library: verified procedures keyed by a model-written description.

Wang et al., *Voyager* (2023), §2.3 "Skill Library" and §2.2 "Self-Verification"; MineDojo/Voyager
``voyager/voyager.py`` (the rollout loop), ``voyager/agents/critic.py`` and ``voyager/agents/skill.py``
(``SkillManager.add_new_skill`` / ``retrieve_skills``, ``retrieval_top_k=5``). PEERS.md "Voyager".

The mechanism, through our task interface:

* **admission only when verified.** After each finished episode the critic decides whether the final
  attempt accomplished the task. ``critic="feedback"`` (default) reads the evaluator's solved flag of
  the final attempt — what Voyager's critic reads is the environment state (inventory, chat log), i.e.
  the outcome itself — and costs no call; ``critic="model"`` makes a VOYAGER_CRITIC call that judges
  from the trajectory's feedback and scores (:mod:`cfjax.peers.voyager.calls`). A rejected episode adds
  nothing: no guesses from failures are stored (why this row stores fewer items than ExpeL: its
  mechanism, not a tuning).
* **the key is a description.** A verified episode gets one VOYAGER_DESCRIBE call; the model's name,
  description and applicability are stored with the procedure (the final, verified action) and the
  text ``name: description`` is embedded — as Voyager embeds ``async function name(bot) { // desc }``,
  the name with the model's summary, never the code nor the source task's question.
* **same name replaces.** Re-adding a name replaces the skill in the library and its index entry
  (``on_duplicate="replace"``, default, what ``add_new_skill`` does to ``self.skills`` and the vector
  store; the version counter mirrors the ``nameV2.js`` file it dumps). ``on_duplicate="keep"`` keeps
  the old one and stores the new one as ``nameV2``, ``nameV3`` … (the files on disk, made retrievable).
* **retrieval** returns the ``top_k`` = 5 skills whose embedded key is most similar (cosine, the
  harness's hashed embedder) to the task: its question, and on a retry (``query.history`` non-empty)
  the question plus a summary of the failed attempt — its evaluator feedback — as Voyager queries with
  ``context + summarize_chatlog(events)``. A task is never shown its own skills (the source task id).
  The skills are shown with the draft as one memory set (:func:`cfjax.peers.common.memory_set`).
  Nothing is mutated at retrieval (Voyager keeps no access statistics).

Simplifications: one episode is one Voyager task (the agent loop's attempts are its up to 4 retries
with feedback; the curriculum is the runner's task order, not a proposer); skills are not composed
(a skill does not call earlier skills) and are shown as text for the backbone to adapt, not executed
as library functions; the critic is one call (Voyager retries a malformed reply up to 5 times: here a
malformed reply is a rejection); the description call sees the whole trajectory (Voyager's sees only
the program), so it can name the step that made the procedure work; the harness's hashed embedder
stands in for OpenAI embeddings; Voyager's skip of the "deposit useless items" task has no counterpart.

What a real model must do that the simulator only draws: the critic must judge success from the
evidence (the simulator is right with a fixed probability, ``p_critic_correct``); the describer must
summarise what a procedure does in general terms and, from a failure → success trajectory, name the
step that made it work (the simulator writes the question's wording plus the shared extractor's
contrast, and for a first-attempt success names no step at all, though a real model might still write
a useful strategy); and the backbone must adapt a retrieved procedure to a new task (the simulator only
carries a stored ``EDIT`` line onto its draft, with adherence falling as five procedures fill the
prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from cfjax.infra.embed import HashingEmbedder
from cfjax.llm.prompts import truncate
from cfjax.memory import Experience, FrozenMemoryError, RecallQuery, SystemContext
from cfjax.peers.common import EmbeddingIndex, load_store, memory_set, save_store
from cfjax.peers.voyager.calls import (VOYAGER_CRITIC, VOYAGER_DESCRIBE, CriticRequest, DescribeRequest,
                                       clean_name)
from cfjax.types import MemoryText

__all__ = ["Skill", "VoyagerSystem", "FORMAT", "CRITICS", "ON_DUPLICATE", "render_skill"]

#: the ``format`` tag of a saved Voyager library
FORMAT = "cfjax.peers.voyager/1"
CRITICS = ("feedback", "model")
ON_DUPLICATE = ("replace", "keep")
_COUNTERS = ("added", "replaced", "rejected", "critic_calls", "critic_disagreed", "describe_failures")


@dataclass
class Skill:
    """One verified procedure (CounterMem's VOYAGER_SKILL: a name, an applicability description, steps)."""

    name: str
    description: str  # the model's description (with its EDIT line, when it named the working step)
    applicability: str
    procedure: str  # the final, verified action
    source: str  # the task id it was verified on
    version: int = 1  # 1 + how often a skill of this name was re-added (Voyager's nameV2.js …)

    def key(self) -> str:
        """The embedded text: the name with the model's description (never the code or the question)."""
        return f"{self.name}: {self.description}"


def render_skill(s: Skill) -> str:
    """How a skill is shown to the backbone: name, description, applicability and the procedure."""
    return truncate(f"SKILL {s.name} (verified on an earlier task)\nDESCRIPTION: {s.description}\n"
                    f"APPLICABILITY: {s.applicability or '(not given)'}\nPROCEDURE:\n{s.procedure}", "record")


class VoyagerSystem:
    """Voyager's skill library as a :class:`~cfjax.memory.MemorySystem` (module docstring).

    Args:
      ctx: the backbone, its build ledger and the attempt limit.
      critic: ``"feedback"`` (the evaluator's solved flag, no call) or ``"model"`` (VOYAGER_CRITIC).
      top_k: skills retrieved per decision (Voyager's ``retrieval_top_k`` = 5).
      on_duplicate: ``"replace"`` (Voyager's library) or ``"keep"`` (old versions stay, new as ``nameV2``).
      embedder: the encoder (default: the harness's hashed embedder).
    """

    def __init__(self, ctx: SystemContext, *, critic: str = "feedback", top_k: int = 5,
                 on_duplicate: str = "replace", embedder: HashingEmbedder | None = None) -> None:
        if critic not in CRITICS:
            raise ValueError(f"Voyager critic must be one of {CRITICS}, got {critic!r}")
        if on_duplicate not in ON_DUPLICATE:
            raise ValueError(f"Voyager on_duplicate must be one of {ON_DUPLICATE}, got {on_duplicate!r}")
        if top_k < 1:
            raise ValueError(f"Voyager top_k must be at least 1, got {top_k}")
        self.ctx = ctx
        self.critic = critic
        self.top_k = top_k
        self.on_duplicate = on_duplicate
        self.index = EmbeddingIndex(embedder)
        self.skills: dict[str, Skill] = {}
        self.counts = dict.fromkeys(_COUNTERS, 0)
        self.frozen = False

    # ------------------------------------------------------------------ build and update
    def _verified(self, exp: Experience) -> bool:
        if self.critic == "feedback":
            return exp.solved
        res = self.ctx.backbone.call(VOYAGER_CRITIC, CriticRequest(exp.task, exp.attempts, exp.episode))
        self.ctx.ledger.llm(exp.task.task_id, res.usage, verification=True)
        self.counts["critic_calls"] += 1
        self.counts["critic_disagreed"] += int(res.success != exp.solved)  # analysis only
        return res.success

    def _learn(self, exp: Experience) -> None:
        if not exp.attempts:
            return
        if not self._verified(exp):
            self.counts["rejected"] += 1
            return
        d = self.ctx.backbone.call(VOYAGER_DESCRIBE, DescribeRequest(exp.task, exp.attempts, True, exp.episode))
        self.ctx.ledger.llm(exp.task.task_id, d.usage, verification=True)
        if not d.parsed:
            self.counts["describe_failures"] += 1
            return
        self.add(Skill(d.name, d.description, d.applicability, exp.attempts[-1].action, exp.task.task_id))

    def add(self, skill: Skill) -> None:
        """Add ``skill`` to the library (a known name: replaced, or kept beside with a version suffix)."""
        old = self.skills.get(skill.name)
        if old is not None:
            self.counts["replaced"] += 1
            if self.on_duplicate == "replace":
                skill.version = old.version + 1
            else:
                i = 2
                while f"{skill.name}V{i}" in self.skills:
                    i += 1
                skill.name, skill.version = f"{skill.name}V{i}", i
        self.counts["added"] += 1
        self._put(skill)

    def _put(self, skill: Skill) -> None:
        self.skills[skill.name] = skill
        self.index.add(skill.name, skill.key())  # re-adding an id replaces its embedding

    def build(self, experience: Sequence[Experience]) -> None:
        """Critic, then (if verified) one VOYAGER_DESCRIBE call, per finished episode in order."""
        for exp in experience:
            self.update(exp)

    def update(self, experience: Experience) -> None:
        if self.frozen:
            raise FrozenMemoryError("Voyager skill library is frozen: no skill may be added during held-out evaluation")
        self._learn(experience)

    def freeze(self) -> None:
        self.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False

    # ------------------------------------------------------------------ recall
    @staticmethod
    def query_text(query: RecallQuery) -> str:
        """The retrieval query: the question, plus the failed attempt's feedback on a retry."""
        text = query.task.question
        if query.history:
            text += f"\n\nThe last attempt failed: {truncate(query.history[-1].feedback, 'feedback')}"
        return text

    def retrieve(self, query: RecallQuery) -> list[tuple[str, float]]:
        """The ``top_k`` skills by cosine of their key to :meth:`query_text`, none of the task's own."""
        tid = query.task.task_id
        return self.index.topk(self.query_text(query), self.top_k, keep=lambda n: self.skills[n].source != tid)

    def recall(self, query: RecallQuery) -> MemoryText | None:
        """The retrieved skills as one memory set (``None`` when the library has none to show)."""
        return memory_set([(n, render_skill(self.skills[n])) for n, _ in self.retrieve(query)])

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path) -> None:
        save_store(path, FORMAT, {"skills": [asdict(s) for s in self.skills.values()], "counts": dict(self.counts),
                                  "critic": self.critic, "on_duplicate": self.on_duplicate})

    def load(self, path: Path) -> None:
        """Replace the library with a saved one (embeddings recomputed from the saved keys).

        Raises:
          ValueError: one line naming the file and the field that is wrong.
        """
        data = load_store(path, FORMAT, "Voyager skill library", {"skills": list, "counts": dict})
        skills: list[Skill] = []
        for i, row in enumerate(data["skills"]):
            if not isinstance(row, dict):
                raise ValueError(f"{path}: skills[{i}] must be an object")
            for f in ("name", "description", "applicability", "procedure", "source"):
                if not isinstance(row.get(f), str):
                    raise ValueError(f"{path}: skills[{i}].{f} must be a string")
            if not isinstance(row.get("version"), int) or row["version"] < 1:
                raise ValueError(f"{path}: skills[{i}].version must be a positive integer")
            if not row["name"] or clean_name(row["name"]) != row["name"]:
                raise ValueError(f"{path}: skills[{i}].name must be a non-empty identifier")
            skills.append(Skill(row["name"], row["description"], row["applicability"], row["procedure"],
                                row["source"], row["version"]))
        counts = data["counts"]
        if not all(isinstance(counts.get(k), int) for k in _COUNTERS):
            raise ValueError(f"{path}: counts must hold integers {', '.join(_COUNTERS)}")
        self.index = EmbeddingIndex(self.index.embedder)
        self.skills = {}
        for s in skills:
            self._put(s)
        self.counts = {k: int(counts[k]) for k in _COUNTERS}

    def summary(self) -> dict:
        """Counts for reports (prefixed: they are merged into a runner's row metrics)."""
        return {"skills": len(self.skills), **{f"skills_{k}" if not k.startswith("critic") else k: v
                                               for k, v in self.counts.items()}}

    def __len__(self) -> int:
        return len(self.skills)
