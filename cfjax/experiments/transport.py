"""What the LLM transport did during a run: faults, retries, failed calls, cache hits.

Every LLM backbone reports counters (:meth:`cfjax.llm.openai_client.OpenAIBackbone.stats`,
:meth:`cfjax.llm.hf.HFBackbone.stats`, and its response cache's); each unit stores them under
``"llm"`` in ``results.json``. :func:`merge_llm` adds them up over units and :func:`format_llm`
renders the report's section, so a run against a flaky server says exactly what went wrong and
how often — and that it finished anyway.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["merge_llm", "format_llm"]

#: counters that are maxima, not sums, over units
_MAX_KEYS = frozenset({"max_inflight_seen"})
#: counters that are means; merged weighted by ``busy_s`` (seconds with a call in flight)
_MEAN_KEYS = frozenset({"mean_inflight", "mean_batch"})


def merge_llm(stats: Iterable[dict | None]) -> dict | None:
    """Sum the units' counters (nested dicts key by key; maxima and time-weighted means kept as
    such); ``None`` when no unit had an LLM backbone."""
    items = [s for s in stats if s]
    if not items:
        return None

    def merge(dicts: list[dict]) -> dict:
        out: dict = {}
        keys = {k for d in dicts for k in d}
        weights = [float(d.get("busy_s") or 0.0) for d in dicts]
        for k in sorted(keys):
            vals = [d.get(k) for d in dicts]
            present = [v for v in vals if v is not None]
            if not present:
                continue
            if all(isinstance(v, dict) for v in present):
                out[k] = merge(present)  # type: ignore[arg-type]
            elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
                if k in _MAX_KEYS:
                    out[k] = max(present)
                elif k in _MEAN_KEYS:
                    pairs = [(float(v), w) for v, w in zip(vals, weights) if v is not None]
                    wsum = sum(w for _, w in pairs)
                    out[k] = (sum(v * w for v, w in pairs) / wsum) if wsum > 0 else sum(v for v, _ in pairs) / len(pairs)
                else:
                    out[k] = sum(present)
            else:
                out[k] = present[0]
        return out

    merged = merge(items)
    cache = merged.get("cache")
    if isinstance(cache, dict):
        lookups = int(cache.get("hits", 0)) + int(cache.get("misses", 0))
        cache["hit_rate"] = cache.get("hits", 0) / lookups if lookups else None
    return merged


def format_llm(stats: dict | None) -> str:
    """The report's "LLM transport" section ("" when the run used the simulator)."""
    if not stats:
        return ""
    lines = ["LLM transport (every call counted once; a failed call is a failed attempt, never a crash)"]
    calls, failed = stats.get("calls", 0), stats.get("failed_calls", 0)
    lines.append(f"  calls {calls:,}  ok {stats.get('ok', calls - failed):,}  failed after retries {failed:,}"
                 f"  HTTP attempts {stats.get('sent', 0):,}  retries {stats.get('retries', 0):,}")
    faults = stats.get("faults") or {}
    if faults:
        shown = "  ".join(f"{k} {v:,}" for k, v in sorted(faults.items()) if v)
        lines.append(f"  faults: {shown or 'none'}")
    extra = [f"{k} {stats[k]:,}" for k in ("sanitised", "truncated", "slow") if stats.get(k)]
    if extra:
        lines.append("  replies: " + "  ".join(extra))
    if stats.get("max_inflight_seen") is not None:
        mean = stats.get("mean_inflight")
        lines.append(f"  in flight: max {stats['max_inflight_seen']}"
                     + (f", mean {mean:.1f} while busy" if isinstance(mean, (int, float)) else ""))
    cache = stats.get("cache")
    if isinstance(cache, dict):
        rate = cache.get("hit_rate")
        lines.append(f"  response cache: {cache.get('hits', 0):,} hits / {cache.get('misses', 0):,} misses"
                     + (f" (hit rate {100 * rate:.1f}%)" if rate is not None else "")
                     + (f", {cache['corrupt']:,} corrupt rows skipped" if cache.get("corrupt") else ""))
    return "\n".join(lines)
