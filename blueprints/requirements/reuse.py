"""Prompt reuse a service declares in `traffic`: a prefix every request shares (`shared_prefix_tokens`: system prompt,
tool definitions, few-shot examples) and multi-turn conversations that resend their history (`sessions`).

Both are facts about the prompts, not settings: the planner turns them into vLLM's prefix caching, a prefix- or
session-aware router in front of several replicas, and fewer prefill tokens per request in the capacity model
(`blueprints.capacity.prefix_cache`).

The session shape the capacity model needs is the number of turns: a conversation of T turns whose every request
carries the shared prefix P, the history so far and a new user message of u tokens, and whose every answer is o
tokens (`mean_output_tokens`) long, sends prompts of P + u + (k - 1)(u + o) tokens at turn k, so the declared mean
prompt is P + u + (T - 1)(u + o) / 2 and u = (2 (mean_input_tokens - P) - (T - 1) o) / (T + 1) (`new_turn_tokens`).
"""

from __future__ import annotations

from pydantic import Field

from blueprints.core import defaults
from blueprints.core.errors import FieldProblem
from blueprints.requirements.fields import Section

#: Longest conversation the session model takes, turns (a bound, not a vLLM limit: past it the mean prompt is
#: almost all history and `mean_input_tokens` says so better).
MAX_SESSION_TURNS = 200
#: The request header the session router hashes (production-stack `--session-key`); clients send one value per
#: conversation. A name of ours, documented in the README [assumption: any header name works, the router reads it
#: from `request.headers`].
SESSION_HEADER = "x-session-id"


class Sessions(Section):
    """Multi-turn conversations: each turn's request resends the conversation so far."""

    turns: int = Field(ge=2, le=MAX_SESSION_TURNS, description="mean turns (requests) per conversation, 2-200; "
                       "each request carries the shared prefix, the history and a new message, and "
                       "`mean_input_tokens` is the mean over all turns")


def new_turn_tokens(mean_input_tokens: int, mean_output_tokens: int, shared_prefix_tokens: int, turns: int) -> float:
    """The new user tokens of one turn, u = (2 (mean_input - P) - (turns - 1) mean_output) / (turns + 1) (module
    docstring); below 1 the declared lengths cannot be a conversation of that many turns."""
    return (2 * (mean_input_tokens - shared_prefix_tokens) - (turns - 1) * mean_output_tokens) / (turns + 1)


def reuse_problems(*, mean_input_tokens: int, mean_output_tokens: int, shared_prefix_tokens: int | None,
                   sessions: Sessions | None) -> list[FieldProblem]:
    """Every contradiction between the declared reuse and the prompt lengths (fields relative to `traffic`)."""
    problems = []
    prefix = shared_prefix_tokens or 0
    if prefix > mean_input_tokens:
        problems.append(FieldProblem("shared_prefix_tokens", f"shared_prefix_tokens={prefix} is above "
                                     f"mean_input_tokens={mean_input_tokens}: the shared prefix is part of every "
                                     f"prompt; lower shared_prefix_tokens to <= {mean_input_tokens} or raise "
                                     "mean_input_tokens", rule="prefix-within-prompt"))
    elif sessions is not None and new_turn_tokens(mean_input_tokens, mean_output_tokens, prefix,
                                                  sessions.turns) < 1:
        most = max(t for t in range(1, MAX_SESSION_TURNS + 1)
                   if t == 1 or new_turn_tokens(mean_input_tokens, mean_output_tokens, prefix, t) >= 1)
        fix = f"lower sessions.turns to <= {most}" if most >= 2 else "drop sessions"
        problems.append(FieldProblem(("sessions", "turns"), f"sessions.turns={sessions.turns} conversations resending "
                                     f"{mean_output_tokens}-token answers cannot average mean_input_tokens="
                                     f"{mean_input_tokens} (shared_prefix_tokens={prefix}): no tokens would be left "
                                     f"for the new message of a turn; {fix}, or raise mean_input_tokens",
                                     rule="sessions-fit-prompt"))
    return problems


def whole_blocks(tokens: float) -> int:
    """`tokens` rounded down to whole KV-cache blocks (`defaults.KV_BLOCK_TOKENS`): vLLM's prefix cache reuses full
    blocks only (vllm/v1/core/kv_cache_manager.py, block hashes cover full blocks)."""
    return int(tokens // defaults.KV_BLOCK_TOKENS) * defaults.KV_BLOCK_TOKENS


def sequences_held(kv_cache_tokens: int, *, request_tokens: int, shared_prefix_tokens: int) -> int:
    """Mean requests of `request_tokens` (prompt + output) one KV cache of `kv_cache_tokens` holds at once: the
    shared prefix's cached blocks are held once for all of them, the rest of each request on its own."""
    shared = min(whole_blocks(shared_prefix_tokens), max(0, request_tokens - 1))
    return max(0, kv_cache_tokens - shared) // (request_tokens - shared)
