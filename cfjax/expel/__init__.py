"""ExpeL (Zhao et al., AAAI 2024) as a memory-system plugin: its call kind, its store, its registration."""

from cfjax.expel.calls import EXPEL_INSIGHT, InsightRequest, InsightResult, parse_lesson, render_insight, render_lesson
from cfjax.expel.memory import ExpeLMemory, build_expel, expel_episode

__all__ = ["EXPEL_INSIGHT", "InsightRequest", "InsightResult", "parse_lesson", "render_insight", "render_lesson",
           "ExpeLMemory", "build_expel", "expel_episode"]
