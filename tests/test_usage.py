"""After deploy, a user knows how to use the stack: the program's outputs and plan.md say how to call the endpoint
(its URL, how to read the key from the secret output, an example request) and how to reach its dashboards and
alerts, from one source (`blueprints.contracts.usage`)."""

from __future__ import annotations

import json
import shlex

import pytest

from blueprints.review.preview import run_preview
from blueprints.review.report.stack import render_markdown
from tests.conftest import ROOT
from tests.bundled import bundled_preview


@pytest.fixture(scope="module")
def chat():
    return bundled_preview("chat-assistant-prod")


def test_the_outputs_say_how_to_call_the_endpoint_with_the_key_from_the_secret_output(chat):
    outputs = chat.outputs
    assert outputs["api_key"] == "[secret]"  # the key itself stays a secret output
    assert outputs["api_key_command"] == "pulumi stack output api_key --show-secrets --stack chat-assistant-prod"
    request = shlex.split(outputs["example_request"])
    assert request[:2] == ["curl", "-sS"]
    assert request[2] == "$(pulumi stack output endpoint --stack chat-assistant-prod)/chat/completions"
    assert "Authorization: Bearer $(pulumi stack output api_key --show-secrets --stack chat-assistant-prod)" in request
    body = json.loads(request[request.index("-d") + 1])
    assert body["model"] == chat.blueprint.model.name  # the served model name the engine answers to
    assert outputs["endpoint"].endswith("/v1")  # .../v1 + /chat/completions is vLLM's chat path
    assert outputs["reach"] == "inside the platform's VPC (and networks peered with it)"


def test_the_dashboard_url_names_the_dashboard_the_stack_deploys(chat):
    configmap = next(m for m in chat.manifests if m["kind"] == "ConfigMap"
                     and m["metadata"]["labels"].get("grafana_dashboard") == "1")
    uid = json.loads(next(iter(configmap["data"].values())))["uid"]
    grafana = chat.outputs["dashboards"]["grafana"]
    assert f"http://localhost:3000/d/{uid} " in grafana
    assert "kubectl -n monitoring port-forward svc/kube-prometheus-stack-grafana 3000:80" in grafana
    assert grafana.startswith("aws eks update-kubeconfig --name platform-prod-us-east-1 --region us-east-1 && ")
    assert "get secret grafana-admin" in grafana
    assert "svc/kube-prometheus-stack-alertmanager 9093:9093" in chat.outputs["alerting"]
    assert "slack receiver" in chat.outputs["alerting"]


def test_a_sagemaker_stack_says_how_to_call_it_signed():
    report = bundled_preview("prototype-summarizer-pilot")
    outputs = report.outputs
    assert "api_key_command" not in outputs
    request = shlex.split(outputs["example_request"])
    assert request[:3] == ["aws", "sagemaker-runtime", "invoke-endpoint"]
    assert json.loads(request[request.index("--body") + 1])["messages"][0]["role"] == "user"
    assert "sagemaker:InvokeEndpoint" in outputs["reach"]
    assert set(outputs["dashboards"]) == {"sagemaker", "cloudwatch", "logs"}  # the console URLs
    md = render_markdown(report)
    assert "### After deploy" in md and "pulumi stack output dashboards --stack prototype-summarizer-pilot" in md


def test_plan_md_has_an_after_deploy_section(chat):
    md = render_markdown(chat)
    section = md[md.index("### After deploy"):md.index("###", md.index("### After deploy") + 5)]
    assert chat.outputs["api_key_command"] in section
    assert chat.outputs["example_request"] in section
    assert "blueprint verify chat-assistant-prod" in section and "blueprint benchmark chat-assistant-prod" in section


def test_an_unmonitored_edge_stack_has_no_dashboards(tmp_path):
    """A non-production edge cluster without a Prometheus (the bundled production one declares one)."""
    from blueprints.contracts.stackconfig import write_stack_configs
    from tests.test_edge_planning import planned
    from tests.test_edge_requirements import NEW_USER_EDGE

    bp = planned(NEW_USER_EDGE)
    assert bp.monitored is False
    write_stack_configs([bp], tmp_path, source="kiosk.yaml", cluster_addons={bp.stack: []})
    report = run_preview(bp.stack, stacks_dir=tmp_path, program=ROOT / "__main__.py")
    assert "dashboards" not in report.outputs
    assert report.outputs["alerting"].startswith("no Prometheus alerts")
    assert "/models/" in report.outputs["example_request"]  # KServe v2 model metadata


def test_a_completions_stacks_example_calls_the_completions_api_with_a_prompt(chat_prod):
    from blueprints.contracts.usage import usage
    from tests.blueprint_builders import derive

    models = chat_prod.model_dump(mode="json")["models"]
    models[0]["traffic"]["api"] = "completions"
    bp = derive(chat_prod, models=models)
    request = shlex.split(usage(bp).example_request)
    assert request[2] == f"$(pulumi stack output endpoint --stack {bp.stack})/completions"  # vLLM's /v1/completions
    body = json.loads(request[request.index("-d") + 1])
    assert body["prompt"] == "Hello" and "messages" not in body
