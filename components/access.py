"""Who may call a self-hosted endpoint: the per-stack API key and the authenticating proxy in front of the engine.

vLLM's own key check guards only `/v1/*` (its `/invocations`, `/metrics`, `/tokenize`, `/pooling`, `/score` and
`/rerank` stay open on the same port), and Triton has no key check at all, so the load balancer never reaches an
engine: it reaches Envoy in the same pod, which passes the engine's client paths only with `Authorization: Bearer
<key>` (the scheme in any case, like vLLM), the health path without, and answers everything else itself (401 for a
client path without the key, 404 for any other path). The engine port is then reachable only from inside the pod and from the monitoring namespace
(`components.network_policy`).

The key is a Pulumi secret: `servingblueprints:apiKey` when set, else a pulumi-random password. It lives in one
Kubernetes Secret (`<service>-api-key`: `api-key`, and the proxy's configuration `envoy.json`, which embeds it:
Envoy's route header matchers take literal values) and is exported only as the secret stack output `api_key`.

Envoy's configuration is `blueprints.contracts.proxy.proxy_config` (its routes and timeouts), serialised to JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.proxy import (  # noqa: F401 (the proxy's config)
    API_KEY_FIELD, PROXY_CONFIG_FIELD, PROXY_TLS_DIR, proxy_config, proxy_routes,
)

PROXY_CONFIG_DIR = "/etc/envoy"
PROXY_PORT_NAME = "api"


def proxy_container(secret_name: pulumi.Input[str], *, pod_start_s: int, lifecycle: dict,
                    tls_secret: str | None = None) -> tuple[dict, list[dict]]:
    """(the proxy container, its volumes): Envoy reading `envoy.json` from the API-key Secret (and, with
    `tls_secret`, the kubernetes.io/tls Secret it serves TLS with at `PROXY_TLS_DIR`). Its UID and the rest of its
    hardening come from `components.hardening`. Its startup probe allows the pod's whole start budget
    (`pod_start_s`, the engine's download and load), like every container of a serving pod; `lifecycle` is the request
    path's drain (`components.rollout.container_lifecycle`): Envoy closes its listeners at once on SIGTERM."""
    resources = dict(defaults.PROXY_RESOURCES)
    container = {
        "name": "auth-proxy",
        "image": defaults.ENVOY_IMAGE,
        "command": ["/usr/local/bin/envoy"],
        "args": ["--config-path", f"{PROXY_CONFIG_DIR}/{PROXY_CONFIG_FIELD}", "--disable-hot-restart",
                 "--log-level", "warn"],
        "ports": [{"name": PROXY_PORT_NAME, "containerPort": defaults.PROXY_PORT, "protocol": "TCP"}],
        "lifecycle": lifecycle,
        "resources": {"requests": resources, "limits": resources},
        "startupProbe": {"tcpSocket": {"port": PROXY_PORT_NAME}, "periodSeconds": 10,
                         "failureThreshold": max(3, math.ceil(pod_start_s / 10))},
        "readinessProbe": {"tcpSocket": {"port": PROXY_PORT_NAME}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": PROXY_PORT_NAME}, "periodSeconds": 15, "failureThreshold": 4},
        "volumeMounts": [{"name": "proxy-config", "mountPath": PROXY_CONFIG_DIR, "readOnly": True}],
    }
    volumes = [{"name": "proxy-config", "secret": {"secretName": secret_name, "defaultMode": 0o440,
                                                   "items": [{"key": PROXY_CONFIG_FIELD, "path": PROXY_CONFIG_FIELD}]}}]
    if tls_secret is not None:
        container["volumeMounts"].append({"name": "proxy-tls", "mountPath": PROXY_TLS_DIR, "readOnly": True})
        volumes.append({"name": "proxy-tls", "secret": {"secretName": tls_secret, "defaultMode": 0o440,
                                                        "items": [{"key": "tls.crt", "path": "tls.crt"},
                                                                  {"key": "tls.key", "path": "tls.key"}]}})
    return container, volumes


def api_key_env(secret_name: pulumi.Input[str], env_name: str = "API_KEY") -> dict:
    """An environment variable holding the key, from the Secret (for an engine that checks it itself: Triton)."""
    return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": API_KEY_FIELD}}}


def checked_api_key(key: str | None) -> str:
    """`key` when it can guard an endpoint: at least `defaults.MIN_API_KEY_CHARS` characters, no whitespace (the
    token of `Authorization: Bearer <token>` has none, and the proxy's check relies on it:
    `blueprints.contracts.proxy.api_key_matchers`). Checked where the secret is decrypted (the stack file holds only
    its ciphertext).

    Raises:
        pulumi.RunError: the key is empty, too short or holds whitespace; the message names the config key and the
            fix.
    """
    fix = ("`pulumi config set --secret servingblueprints:apiKey \"$(openssl rand -hex 20)\"`, or remove it for a "
           "generated key")
    if key is None or len(key.strip()) < defaults.MIN_API_KEY_CHARS:
        length = 0 if key is None else len(key.strip())
        raise pulumi.RunError(
            f"servingblueprints:apiKey has {length} characters; an API key needs at least "
            f"{defaults.MIN_API_KEY_CHARS} random ones: {fix}")
    if any(c.isspace() for c in key):
        raise pulumi.RunError("servingblueprints:apiKey holds whitespace, which no `Authorization: Bearer <key>` "
                              f"header can carry; set a key without any: {fix}")
    return key


@dataclass
class ApiKeyArgs:
    """Inputs of `ApiKey`.

    Args:
        blueprint: a self-hosted blueprint (vLLM, Triton or ONNX Runtime).
        namespace: the service's namespace.
        value: the key (a Pulumi secret, `servingblueprints:apiKey`). Defaults to a generated one.
    """

    blueprint: Blueprint
    namespace: pulumi.Input[str]
    value: pulumi.Input[str] | None = None


class ApiKey(pulumi.ComponentResource):
    """The stack's API key (given, or a pulumi-random password) and the Secret holding it with the proxy's config.

    Outputs: `secret_name`, `api_key` (secret).
    """

    def __init__(self, name: str, args: ApiKeyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:ApiKey", name, None, opts)
        bp = args.blueprint
        child = pulumi.ResourceOptions(parent=self)
        self.generated = None
        if args.value is None:
            self.generated = random.RandomPassword(f"{name}-value", length=defaults.API_KEY_LENGTH, special=False,
                                                   opts=child)
            key = self.generated.result
        else:
            key = pulumi.Output.secret(args.value).apply(checked_api_key)
        self.api_key = pulumi.Output.secret(key)
        config = self.api_key.apply(lambda k: json.dumps(proxy_config(bp, k), sort_keys=True))
        from components.labels import recommended_labels

        self.secret = k8s.core.v1.Secret(
            f"{name}-secret",
            metadata={"name": f"{bp.service}-api-key", "namespace": args.namespace,
                      "labels": recommended_labels(name="auth-proxy", instance=bp.stack, component="api-key")},
            type="Opaque", string_data={API_KEY_FIELD: self.api_key, PROXY_CONFIG_FIELD: pulumi.Output.secret(config)},
            opts=child)
        self.secret_name = self.secret.metadata.name
        self.register_outputs({"secret_name": self.secret_name, "api_key": self.api_key})
