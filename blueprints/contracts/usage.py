"""How a deployed stack is used: the stack outputs `api_key_command`, `example_request`, `dashboards` and `alerting`
(the program exports them, `components.archetypes`), the "After deploy" section of plan.md
(`blueprints.review.report.stack`) and the README's "After deploy" section say the same, from here.

Kubernetes archetypes: the endpoint URL is the stack output `endpoint`, the key the secret output `api_key`; the
dashboards and Alertmanager are the platform's kube-prometheus-stack Services (catalog `endpoints`), reached with
`kubectl port-forward` after `aws eks update-kubeconfig`. SageMaker: IAM-authorised requests (`aws sagemaker-runtime
invoke-endpoint`), CloudWatch dashboards and alarms (console URLs in the outputs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.client_api import inference_path, model_list_path, request_url
from blueprints.contracts.observability import grafana_dashboard
from blueprints.contracts.sections import Archetype

#: The Secret holding Grafana's admin user and password (`admin-user`, `admin-password`), in the monitoring
#: namespace; the platform generates the password (`components.addons`).
GRAFANA_ADMIN_SECRET = "grafana-admin"
#: Local ports the port-forward commands use.
LOCAL_PORTS = {"grafana": 3000, "prometheus": 9090, "alertmanager": 9093}


@dataclass(frozen=True)
class Usage:
    """How to call the endpoint and where to look after deploy (shell commands as strings).

    Attributes:
        api_key_command: prints the API key (None: SageMaker, IAM-authorised).
        example_request: one request to the endpoint.
        reach: who can run it (from where the endpoint is reachable).
        dashboards: name -> how to open it.
        alerting: where the alerts go and how to see them.
    """

    api_key_command: str | None
    example_request: str
    reach: str
    dashboards: dict[str, str] = field(default_factory=dict)
    alerting: str = ""


def _output(stack: str, key: str, *, secret: bool = False) -> str:
    return f"$(pulumi stack output {key}{' --show-secrets' if secret else ''} --stack {stack})"


def _service(addon: str, name: str) -> tuple[str, str, int]:
    """(namespace, Service, port) of an add-on's catalogued endpoint `name`."""
    host, port = load_platform_catalog().addon(addon).endpoints[name].rsplit(":", 1)
    service, namespace = host.split(".")[:2]
    return namespace, service, int(port)


def _port_forward(name: str) -> tuple[str, str]:
    namespace, service, port = _service("kube-prometheus-stack", name)
    local = LOCAL_PORTS[name]
    return f"kubectl -n {namespace} port-forward svc/{service} {local}:{port}", f"http://localhost:{local}"


def usage(bp: Blueprint) -> Usage:
    """How to use the stack's endpoint, dashboards and alerts after `pulumi up`."""
    stack = bp.stack
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        body = json.dumps({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 64})
        queue = bp.batch.async_inference if bp.batch is not None else None
        if queue is not None:  # a batch: payloads and results in the model store (InvokeEndpointAsync)
            store = f"s3://{_output(stack, 'weights_bucket')}/{queue.output_prefix}"
            request = (f"echo '{body}' | aws s3 cp - {store}in/hello.json && aws sagemaker-runtime "
                       f"invoke-endpoint-async --region {bp.region} --endpoint-name {_output(stack, 'endpoint_name')} "
                       f"--content-type application/json --input-location {store}in/hello.json  # the result: "
                       f"the reply's OutputLocation, under {store}out/")
            allowed = "sagemaker:InvokeEndpointAsync on the endpoint and s3:PutObject on its in/ prefix"
        else:
            request = (f"aws sagemaker-runtime invoke-endpoint --region {bp.region} --endpoint-name "
                       f"{_output(stack, 'endpoint_name')} --content-type application/json "
                       f"--cli-binary-format raw-in-base64-out --body '{body}' /dev/stdout")
            allowed = "sagemaker:InvokeEndpoint on the endpoint"
        topic = bp.alerting.sns_topic_arn
        return Usage(api_key_command=None, example_request=request,
                     reach=f"callers with AWS credentials allowed {allowed} (SigV4)"
                     + (", from inside the platform's VPC (private endpoint)" if bp.network.private_only else ""),
                     dashboards={"cloudwatch": f"pulumi stack output dashboards --stack {stack} (the console URLs "
                                 "of the endpoint, its CloudWatch dashboard and its logs)"},
                     alerting=f"CloudWatch alarms (stack output `alarms`) notify {topic or 'no SNS topic'}"
                     + ("" if topic else ": set platform.yaml alerting.sns_topic_arns or "
                        "servingblueprints:alarmTopicArn"))
    key = _output(stack, "api_key", secret=True)
    endpoint = _output(stack, "endpoint")
    if bp.archetype is Archetype.VLLM_GPU:
        call = inference_path(bp)
        prompt = ({"messages": [{"role": "user", "content": "Hello"}]} if call.path == "/chat/completions"
                  else {"prompt": "Hello"})
        body = json.dumps({"model": bp.model.name, **prompt, "max_tokens": 64})
        request = (f'curl -sS "{request_url(endpoint, call)}" -H "Authorization: Bearer {key}" '
                   f"-H 'Content-Type: application/json' -d '{body}'")
    else:
        metadata, infer = model_list_path(bp), inference_path(bp)
        request = (f'curl -sS "{request_url(endpoint, metadata)}" -H "Authorization: Bearer {key}"  # KServe v2 '
                   f"{metadata.purpose}; infer: {infer.method} {request_url(endpoint, infer)}")
    exposure = bp.network.exposure
    if bp.wakes_on_request:
        reach = "pods in the cluster (the KEDA HTTP interceptor's in-cluster URL: it scales to zero)"
    elif bp.platform.kind != "eks":
        via = exposure.via.value if exposure.via else "load-balancer"
        reach = (f"clients reaching the {bp.platform.kind}'s {via}"
                 + (f" from {', '.join(exposure.allowed_cidrs)}" if exposure.allowed_cidrs else ""))
    elif exposure.scope.value == "public":
        reach = f"the internet, from {', '.join(exposure.allowed_cidrs)} only"
    else:
        reach = "inside the platform's VPC (and networks peered with it)"
    dashboards: dict[str, str] = {}
    alerting = "no Prometheus alerts (the cluster runs no kube-prometheus-stack)"
    if bp.monitored:
        kubeconfig = (f"aws eks update-kubeconfig --name {bp.platform.stack} --region {bp.region} && "
                      if bp.platform.kind == "eks" and bp.platform.stack else "")
        grafana, grafana_url = _port_forward("grafana")
        prometheus, prometheus_url = _port_forward("prometheus")
        alertmanager, alertmanager_url = _port_forward("alertmanager")
        namespace = _service("kube-prometheus-stack", "grafana")[0]
        dashboards = {
            "grafana": f"{kubeconfig}{grafana}, then {grafana_url}/d/{grafana_dashboard(bp)['uid']} (user admin, "
                       "password: "
                       f"kubectl -n {namespace} get secret {GRAFANA_ADMIN_SECRET} -o "
                       "jsonpath='{.data.admin-password}' | base64 -d)",
            "prometheus": f"{kubeconfig}{prometheus}, then {prometheus_url}/alerts",
        }
        receiver = bp.alerting.receiver
        alerting = (f"the PrometheusRule's alerts (stack output `alerts`) page through the platform's "
                    f"{receiver} receiver" if receiver else "the PrometheusRule's alerts (stack output `alerts`) "
                    "reach no receiver (set platform.yaml alerting.receiver)") + \
            f"; see them: {kubeconfig}{alertmanager}, then {alertmanager_url}"
    return Usage(api_key_command=f"pulumi stack output api_key --show-secrets --stack {stack}",
                 example_request=request, reach=reach, dashboards=dashboards, alerting=alerting)


def usage_outputs(bp: Blueprint) -> dict[str, object]:
    """The stack outputs that say how to use the stack (no secret: commands that read the secret output)."""
    u = usage(bp)
    outputs: dict[str, object] = {"example_request": u.example_request, "reach": u.reach, "alerting": u.alerting}
    if u.api_key_command is not None:
        outputs["api_key_command"] = u.api_key_command
    if u.dashboards and bp.archetype is not Archetype.SAGEMAKER_ENDPOINT:
        outputs["dashboards"] = u.dashboards
    return outputs
