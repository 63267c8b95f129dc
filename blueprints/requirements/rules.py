"""The rules a requirements file must follow that its JSON Schema cannot state: rules across fields, against the
catalog's physics, or across files (the shared platform). `blueprint schema` lists them under
`x-cross-field-rules`; every error that enforces one carries its id (`FieldProblem.rule`, `BlueprintError.rule`), so a
document valid against the schema either plans or fails naming one of these.

Adding a rule: give it an id and one line here, raise `FieldProblem(field, message, rule=id)` from the model's
validator (or `RequirementsError(message, rule=id)` where the planner finds it), and add a failing case to
`tests/test_input_rules.py`.
"""

from __future__ import annotations

#: Rule id -> what it requires. The text is what `blueprint schema` shows; the errors say the fix.
CROSS_FIELD_RULES: dict[str, str] = {
    # The choice (`blueprint choose` writes it)
    "choice-one-chosen": "`choice.finalists` has exactly one finalist of verdict `chosen`, and its candidate is "
                         "`choice.candidate`",
    "choice-environment": "`choice.environment` is one of `environments`",
    "choice-candidate-fits": "the `tensor_parallel_size` of `choice.candidate` and of each finalist's candidate is "
                             "at most its instance type's GPU count",
    "choice-dates": "`choice.decided` is not in the future and no result file of `choice.finalists` is dated after it",
    # The model section
    "model-or-models": "exactly one of `model` (one model) or `models` (several); top-level `traffic` goes with `model`",
    "model-traffic": "`model` needs `traffic` (top level or `model.traffic`); each entry of `models` its own `traffic`",
    "unique-model-names": "the served names of `models` (`name`, else the id) are unique",
    "unique-adapter-names": "the names of `model.adapters` are unique and none is the base model's served name",
    "adapters-servable": "`adapters` go on a dense text-generation model with a known `intermediate_size`, served "
                         "by vLLM (`operations.preference` not `managed`; with `any`, adapters choose vllm-gpu)",
    "engines-serve-model": "`operations.engines` holds an engine serving each model's quantisation method and LoRA "
                           "adapters (blueprints/catalog/engines.yaml features)",
    "model-id-or-architecture": "a model gives a catalog `id` or an `architecture`; one given by `architecture` also "
                                "needs `name` and `task`",
    "quantization-precision": "`quantization` comes with the precision its method produces (awq: int4; gptq: int4 or "
                              "int8; fp8: fp8; w8a8: int8)",
    "measured-latency-pair": "`measured_latency_ms` and `measured_instance_type` are given together",
    "task-of-catalog-model": "`task` of a catalog model is the catalog's task",
    "https-needs-sha256": "an `https://` weights_uri comes with `sha256`, and `sha256` only with one",
    "source-key-s3-only": "`weights_kms_key_arn` goes with an `s3://` weights_uri",
    "architecture-shape": "an `architecture` is self-consistent: MoE fields together, experts_per_token <= experts, "
                          "shared_params_b < params_b, active_params_b within params_b, the embeddings within "
                          "params_b",
    "context-within-model": "`max_context_tokens` is within the catalog model's context limit",
    "context-holds-requests": "a text-generation model's context holds a mean request (mean_input_tokens + "
                              "mean_output_tokens) and a p95 one (input_tokens_p95 + output_tokens_p95)",
    "p95-lengths-text-generation": "`input_tokens_p95` / `output_tokens_p95` are given for text generation only",
    "vision-needs-measurement": "a vision or speech-recognition model without the catalog's FLOPs figure (outside "
                                "the catalog, or given an `architecture`) gives `measured_latency_ms` and "
                                "`measured_instance_type`",
    "p95-around-mean": "a p95 token length is at least its mean and at most 3.5x it",
    "prefix-within-prompt": "`traffic.shared_prefix_tokens` <= `traffic.mean_input_tokens`",
    "sessions-fit-prompt": "`traffic.sessions.turns` leaves at least one new token per turn in `mean_input_tokens` "
                           "after the shared prefix and the resent answers (blueprints/requirements/reuse.py)",
    # SLO and hardware against the models
    "slo-matches-task": "text generation sets `slo.ttft_p95_ms` / `itl_p95_ms`; other models `slo.latency_p95_ms` "
                        "/ `latency_p99_ms`",
    "latency-p99-not-below-p95": "`slo.latency_p99_ms` >= `slo.latency_p95_ms`, `slo.ttft_p99_ms` >= "
                                 "`slo.ttft_p95_ms`, `slo.itl_p99_ms` >= `slo.itl_p95_ms`",
    "servable-format": "the model's `format` is one its engine loads (vLLM: safetensors, pytorch; ONNX "
                       "Runtime: onnx; Triton: onnx, tensorrt (GPU), torchscript, pytorch, safetensors), and the python backend "
                       "(safetensors on Triton) reads an s3:// prefix holding its model.py",
    "one-generative-model": "a `models:` estate holds at most one text-generation model (with retrieval models it "
                            "plans as a compound service) and is not `operations.preference: managed`",
    "managed-needs-gpu": "`operations.preference: managed` allows `nvidia-gpu` (SageMaker hosting types are GPUs)",
    # Environments
    "environment-peak-rate": "each environment's peak (peak_requests_per_s x traffic_scale) is between 0.001 and "
                             "100,000 requests/s per model",
    "min-replicas-not-above-max": "`min_replicas` <= `max_replicas`",
    "region-allowed": "each environment's region is in `compliance.regions_allowed` (when given)",
    "production-on-demand": "a production environment does not use spot capacity",
    "production-monitored": "a production environment on an existing or edge cluster declares kube-prometheus-stack "
                            "in `operations.cluster_addons` (its stack renders monitoring and alerts)",
    "production-always-on": "a production environment never scales to zero (`min_replicas` >= 1)",
    "daily-shape-hours": "`traffic.daily.peak_hours` are two different hours 0-23 and `timezone` an IANA time zone",
    "batch-or-peak": "`traffic` gives `peak_requests_per_s` (interactive) or `batch` (a daily batch), not both; a "
                     "batch's work over its deadline is 0.001-100,000 requests/s, and it has no `pattern`, `daily`, "
                     "`weekly` or `sessions`",
    "batch-one-volume": "`traffic.batch` gives exactly one of `requests_per_day` or `tokens_per_day`",
    "batch-tokens-need-lengths": "`traffic.batch.tokens_per_day` comes with `traffic.mean_input_tokens` and "
                                 "`mean_output_tokens` given (it is converted to requests with them)",
    "batch-window": "`traffic.batch.window` is given, with exactly one of `length_hours` or `end_hour` (not "
                    "`start_hour`) and an IANA `timezone`",
    "batch-deadline-within-window": "`traffic.batch.deadline_hours` is at most the window's length",
    "batch-dst-gap": "the batch run's start (`traffic.batch.window.start_hour`) and end (start + `deadline_hours`) "
                     "are local times that exist every day in the window's `timezone` (not in a daylight-saving gap)",
    "batch-service": "a batch service (`traffic.batch`) serves one text-generation `model` (self-hosted on vLLM, "
                     "or on a SageMaker asynchronous endpoint with `operations.preference: managed` or `any`), with no "
                     "`slo` latency or attainment targets and no `min_replicas` / `max_replicas`",
    "batch-async-limits": "a batch on SageMaker asynchronous inference starts its last request within "
                          "`RequestTTLSeconds` (21,600 s) of the window's start and each request within "
                          "`InvocationTimeoutSeconds` (3,600 s)",
    "batch-deadline-holds-request": "`traffic.batch.deadline_hours` leaves time for a replica's start and one "
                                    "request's latency at the planned operating point",
    "weekly-shape-days": "`traffic.weekly.weekend_days` names 1-6 different days",
    "longest-violation-scale-to-zero": "`slo.longest_violation_minutes: 0` with bursty or spiky traffic needs every "
                                       "environment warm (`min_replicas` >= 1): a cold start misses a minute",
    "slo-attainment-reachable": "`slo.attainment_pct` (and `slo.longest_violation_minutes`), when set, is met by the "
                                "simulated day with at most the peak's replicas kept warm",
    "cluster-addons-existing-cluster": "`operations.cluster_addons` is for `operations.platform: existing-cluster` "
                                       "or `edge-cluster`",
    "roles-anywhere-edge-only": "`operations.roles_anywhere` is for `operations.platform: edge-cluster`",
    "edge-addons-not-aws-only": "an edge cluster's `cluster_addons` run off AWS (no Karpenter, no AWS Load Balancer "
                                "Controller)",
    "edge-cluster-settings": "an edge cluster declares `hardware.edge_nodes`, allows cpu, no EC2 families, spot, "
                             "managed preference, customer-managed KMS, hf:// sources or ACM certificates; "
                             "`edge_nodes` and https:// sources are for edge clusters only",
    # Exposure
    "cidr-network-address": "each CIDR (`exposure.allowed_cidrs`, a platform's `vpc_cidr` and "
                            "`public_access_cidrs`) has its host bits zero (a network address)",
    "open-internet-acknowledged": "0.0.0.0/0 in `exposure.allowed_cidrs` needs `acknowledge_open_internet: true`",
    "public-needs-tls-and-cidrs": "`exposure.scope: public` needs `tls_certificate_arn` (or `tls_secret_name`) and "
                                  "`allowed_cidrs`",
    "one-tls-source": "`exposure.tls_certificate_arn` and `tls_secret_name` exclude each other",
    "exposure-settings-match-via": "`node_port` goes with `via: node-port`; `ingress_class_name`, `ingress_namespace` "
                                   "with `via: ingress`, which terminates TLS with `tls_secret_name` for `hostname`",
    "exposure-implemented": "the exposure has an implementation the cluster declares (a LoadBalancer controller, an "
                            "ingress controller) and TLS of the kind it terminates",
    "private-not-public": "`compliance.private_only` forbids `exposure.scope: public`",
    "certificate-region": "`exposure.tls_certificate_arn` is in every environment's region",
    "public-always-on": "`exposure.scope: public` never scales to zero (`min_replicas` >= 1)",
    # The shared platform (this file with platform.yaml and the other services)
    "requirements-in-folder": "a requirements file is planned from the project's requirements folder "
                              "(`stacks/requirements/`), where every file shapes the shared platforms",
    "platform-one-region": "every environment landing on one platform (`environments.<env>.platform`) is in its region",
    "kubernetes-version-matches-platform": "`operations.kubernetes_version` equals the version of the platform the "
                                           "service lands on",
    "private-platform-runner": "a platform that platform.yaml makes private (`private_endpoint: true`) has an "
                               "`existing_vpc` and a `runner_label`",
    "platform-posture-meets-service": "the posture platform.yaml gives a platform (private_endpoint, secrets_kms, "
                                      "audit_logging; or strictest_service_wins) meets the compliance of every "
                                      "self-hosted service landing on it",
    "platform-production-apart": "production and non-production environments land on different platforms",
    "platform-name-declared": "`environments.<env>.platform` is a platform name (`<env>-<region>` or one platform.yaml "
                              "declares) and set only where the service lands on a shared platform (self-hosted on "
                              "eks)",
    "stack-names-unique": "service names and the stacks they plan (`<service>-<env>`) are unique across the "
                          "requirements files and never a platform stack's name",
    "kubernetes-version-supported": "a Kubernetes version is released on the plan date, still supported by EKS, "
                                    "recent enough for the workloads and supported by the pinned add-ons",
    "platform-settings": "the service agrees with platform.yaml (spot policy, private_endpoint, public subnets of an "
                         "existing VPC)",
    "images-pull-in-vpc": "an EKS platform's existing VPC reaches the public registries its images and charts come "
                          "from (`existing_vpc.internet_egress`)",
    # Compound services (a generator and retrieval models in `models:`)
    "pipeline-budget-compound-only": "`slo.pipeline_latency_p95_ms` is set only for a compound service",
    "compound-service-name-length": "a compound service's name leaves room for its parts' names "
                                    "(`<service>-generator`, `<service>-retrieval`: at most 40 characters)",
    # The plan
    "override-applies": "each `overrides` entry names environments of the file, a `part` only of a compound "
                        "service, a setting its archetype has, a whole number for an integer setting, and a value "
                        "the setting's bounds and the stack's floors (compliance, policy config) admit",
    "feasible-plan": "some allowed instance type serves the models within the SLO, the budget and the replica limit "
                     "(at most 1,000 replicas per stack); the error names the constraint to relax",
}


def documented(rule: str | None) -> bool:
    """Whether `rule` is a documented cross-field rule."""
    return rule is not None and rule in CROSS_FIELD_RULES
