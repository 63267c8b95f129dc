"""The router a blueprint plans in front of several vLLM replicas that reuse prompts (`Blueprint.router`).

The vLLM production-stack router discovers the engine pods by label through the Kubernetes API and sends each request
to the replica that most likely holds its prompt in vLLM's prefix cache:

- `prefixaware` (a shared prefix, single-turn requests): the longest match of the prompt's 128-character chunks
  against a trie of the prompts each replica served; below a match, the least-loaded replica.
- `session` (multi-turn conversations): a consistent hash of the session header (`SESSION_HEADER`), so every turn of a
  conversation lands where its history is cached; without the header, the least-loaded replica.

The router pod runs behind the same authenticating proxy as the engine pods, and reaches each engine pod through that
pod's proxy port with the key (`--k8s-port` = the proxy's port, `VLLM_API_KEY` from the key's Secret): no request
skips an engine's proxy, and the engine pods' NetworkPolicy admits their proxy port from the router pods only
(`components.router`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from blueprints.core.jsontypes import ClosedModel
from blueprints.contracts.sections import IMAGE_REF, Port

#: How the router picks a replica (production-stack `--routing-logic`).
RoutingLogic = Literal["prefixaware", "session"]


class RouterPlan(ClosedModel):
    """The planned router: image, routing logic, replicas and how it reaches the engines."""

    image: str = Field(pattern=IMAGE_REF, description="pinned production-stack router image (catalog router.yaml)")
    routing_logic: RoutingLogic = Field(description="--routing-logic: prefixaware (shared prefix) or session "
                                        "(multi-turn conversations)")
    session_key: str | None = Field(default=None, pattern=r"^[a-z0-9-]{1,64}$", description="--session-key, the "
                                    "request header naming a conversation (session routing only)")
    replicas: int = Field(ge=2, le=10, description="router pods (a PodDisruptionBudget keeps one available)")
    port: Port = Field(description="--port the router listens on inside its pod (its proxy forwards to it)")
    failover_reroute_attempts: int = Field(ge=0, le=5, description="--max-instance-failover-reroute-attempts: "
                                           "retries on another replica before the first response byte")

    @property
    def args(self) -> list[str]:
        """The router's flags besides discovery (`components.router` adds namespace, selector and port)."""
        out = [f"--routing-logic={self.routing_logic}"]
        if self.session_key:
            out.append(f"--session-key={self.session_key}")
        return [*out, f"--max-instance-failover-reroute-attempts={self.failover_reroute_attempts}"]


def router_workload_name(service: str) -> str:
    """The router's Deployment, ServiceAccount, Role and PodDisruptionBudget: `<service>-router`."""
    return f"{service}-router"


def router_metrics_service_name(service: str) -> str:
    """The ClusterIP Service Prometheus scrapes the router through (`<service>-router-metrics`): its series carry
    `job=<this name>`, which every router query names and every engine query excludes (both export `vllm:` names)."""
    return f"{router_workload_name(service)}-metrics"
