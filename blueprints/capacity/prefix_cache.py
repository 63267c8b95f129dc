"""Prompt tokens vLLM's prefix cache serves instead of prefilling: the one place the capacity model shortens prompts.

vLLM (automatic prefix caching, on by default in 0.24.0 and explicit in our args) keeps the KV blocks of computed
prompts and reuses every full block (`defaults.KV_BLOCK_TOKENS` tokens) whose content and position match the start of
a new prompt, so those tokens cost no prefill step and no TTFT. Which requests find their prefix cached depends on
the routing:

- **Shared prefix** (`shared_prefix_tokens`, P): every request carries it, so each replica computes it on its first
  request and keeps it (a block every request touches is never the least recently used): hit probability ~1 on any
  routing, round robin included (the first request per replica and start misses: negligible).
- **Session history** (`sessions.turns`, T): the history of a conversation is cached only on the replica that served
  its previous turn. Round robin over N replicas lands there with probability 1/N; session routing (a consistent hash
  of the session header) always, and prefix-aware routing too (the previous prompt is the longest match).

Per request, with u new user tokens per turn (`blueprints.requirements.reuse.new_turn_tokens`), the mean history is
mean_input - P - u and the cached mean is `P x 1 + (mean_input - P - u) x hit`, floored to whole KV blocks. The
capacity model then sees prompts shorter by that many tokens: the mean and the p95 shift down alike
(`blueprints.capacity.planning.traffic_shape`).

Assumed, not modelled [assumption]: a conversation's history stays in the cache between turns (no eviction under
memory pressure: true while the KV cache is not full, which `max_num_seqs` keeps); the cached blocks of a session's
history are per conversation, yet the simulation's KV accounting sees only the uncached tokens (the shared prefix's
blocks are shared, so there it is exact); clients send the session header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from blueprints.contracts.sections import ModelTraffic
from blueprints.requirements.model import Traffic
from blueprints.requirements.reuse import new_turn_tokens, whole_blocks

#: How requests reach replicas: round robin (a Service, or the router without a match) or the planned router.
Routing = Literal["roundrobin", "prefixaware", "session"]


@dataclass(frozen=True)
class PromptReuse:
    """The reuse a traffic description declares (tokens per request, means)."""

    mean_input_tokens: int
    mean_output_tokens: int
    shared_prefix_tokens: int = 0
    session_turns: int | None = None

    @property
    def declared(self) -> bool:
        """Any reuse declared (then vLLM runs with prefix caching and, over replicas, the router)."""
        return self.shared_prefix_tokens > 0 or self.session_turns is not None

    @property
    def history_tokens(self) -> float:
        """Mean resent conversation per request, tokens (0 without sessions)."""
        if self.session_turns is None:
            return 0.0
        new = new_turn_tokens(self.mean_input_tokens, self.mean_output_tokens, self.shared_prefix_tokens,
                              self.session_turns)
        return max(0.0, self.mean_input_tokens - self.shared_prefix_tokens - new)


def routing_for(reuse: PromptReuse, *, routed: bool) -> Routing:
    """The routing a plan gives this reuse: session routing for conversations, prefix-aware for a shared prefix
    alone, round robin without the router (`routed=False`)."""
    if not routed or not reuse.declared:
        return "roundrobin"
    return "session" if reuse.session_turns is not None else "prefixaware"


def history_hit_rate(routing: Routing, replicas: int) -> float:
    """The chance a turn finds its conversation's history cached on the replica it reaches: 1/N round robin over N
    replicas, 1 with session or prefix-aware routing."""
    return 1.0 / max(1, replicas) if routing == "roundrobin" else 1.0


def cached_prompt_tokens(reuse: PromptReuse, *, routing: Routing, replicas: int) -> int:
    """Mean prompt tokens per request served from the prefix cache, whole KV blocks (module docstring), and always
    fewer than the mean prompt (vLLM computes at least the last prompt token)."""
    cached = reuse.shared_prefix_tokens + reuse.history_tokens * history_hit_rate(routing, replicas)
    return max(0, min(whole_blocks(cached), reuse.mean_input_tokens - 1))


def sizing_cached_tokens(reuse: PromptReuse) -> int:
    """`cached_prompt_tokens` of the one replica the planner sizes: routed (session or prefix-aware routing, or one
    replica: either way every turn finds its conversation's history), the shared prefix and the mean history in whole
    KV blocks. `blueprint benchmark` sends this many tokens as the prefix every prompt shares."""
    return cached_prompt_tokens(reuse, routing=routing_for(reuse, routed=True), replicas=1)


def shared_cached_tokens(reuse: PromptReuse) -> int:
    """The part of `cached_prompt_tokens` every request shares (the shared prefix's whole blocks): its KV blocks are
    held once per replica, not per sequence."""
    return max(0, min(whole_blocks(reuse.shared_prefix_tokens), reuse.mean_input_tokens - 1))


def requested_reuse(traffic: Traffic) -> PromptReuse:
    """The reuse a requirements file's `traffic` declares."""
    return PromptReuse(traffic.mean_input_tokens, traffic.mean_output_tokens, traffic.shared_prefix_tokens or 0,
                       traffic.sessions.turns if traffic.sessions else None)


def planned_reuse(traffic: ModelTraffic) -> PromptReuse:
    """The reuse a stack config's model traffic records."""
    return PromptReuse(traffic.mean_input_tokens, traffic.mean_output_tokens, traffic.shared_prefix_tokens or 0,
                       traffic.session_turns)
