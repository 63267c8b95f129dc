"""Prompt reuse in a vLLM plan: prefix caching on, and over more than one replica the prefix/session-aware router
(`blueprints.contracts.router`), with the rationale of what the capacity model counted."""

from __future__ import annotations

from blueprints.capacity.prefix_cache import PromptReuse, cached_prompt_tokens, routing_for
from blueprints.catalog.router import load_router_catalog
from blueprints.contracts.router import RouterPlan
from blueprints.requirements.reuse import SESSION_HEADER


def plan_router(reuse: PromptReuse, *, min_replicas: int, max_replicas: int, port: int) -> RouterPlan | None:
    """The router for a vLLM service, or None: no reuse declared, at most one replica (one replica holds every
    prefix), or scale to zero (the KEDA HTTP interceptor in front waits on the engine pods' endpoints, which a router
    in between would hide: it would answer 503 while the first replica starts). The router listens on `port`, the
    engine's, inside its pod: the pod's proxy forwards there with the engine's proxy configuration."""
    if not reuse.declared or max_replicas <= 1 or min_replicas < 1:
        return None
    facts = load_router_catalog()
    routing = routing_for(reuse, routed=True)
    return RouterPlan(image=facts.image, routing_logic=routing,  # type: ignore[arg-type]
                      session_key=SESSION_HEADER if routing == "session" else None, replicas=facts.replicas,
                      port=port, failover_reroute_attempts=facts.failover_reroute_attempts)


def reuse_reasons(reuse: PromptReuse, router: RouterPlan | None, *, max_replicas: int) -> list[str]:
    """What the plan did with the declared reuse and what the capacity model assumed (empty without reuse)."""
    if not reuse.declared:
        return []
    routed = cached_prompt_tokens(reuse, routing=routing_for(reuse, routed=True), replicas=max(2, max_replicas))
    words = [f"{reuse.shared_prefix_tokens} shared prefix tokens"] if reuse.shared_prefix_tokens else []
    if reuse.session_turns is not None:
        words.append(f"{reuse.session_turns}-turn sessions resending {reuse.history_tokens:.0f} history tokens on "
                     "average")
    out = [f"prompt reuse ({', '.join(words)}): vLLM runs with --enable-prefix-caching; the capacity model counts "
           f"{routed} of the {reuse.mean_input_tokens} mean prompt tokens as cached (whole 16-token KV blocks: the "
           "shared prefix cached on every replica after its first request, the history on the replica that served "
           "the previous turn) and prefills the rest"]
    if router is not None:
        how = (f"session routing on the {router.session_key} header (clients send one value per conversation)"
               if router.routing_logic == "session" else "prefix-aware routing (longest cached prompt prefix)")
        out.append(f"up to {max_replicas} replicas: the production-stack router ({router.replicas} pods behind the "
                   f"authenticating proxy) sends each request by {how}; round robin would find a session's history "
                   f"cached 1/N of the time ({cached_prompt_tokens(reuse, routing='roundrobin', replicas=max_replicas)}"
                   f" cached tokens at {max_replicas} replicas). A router outage is an outage of the endpoint (two "
                   "pods and a disruption budget; alerts RouterDown, RouterHasNoEngines)")
    elif max_replicas > 1 and reuse.session_turns is not None:
        out.append("scale to zero: no router in front (the KEDA HTTP interceptor must see the engine pods), so with "
                   "more than one replica a session's history is cached on the replica a turn reaches only 1/N of "
                   "the time: TTFT above one replica is optimistic [limitation]")
    return out
