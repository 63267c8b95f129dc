"""LoRA adapters of a text-generation model (`model.adapters`): each a served name, where its files come from and its
rank, bounded by what the pinned vLLM serves (`blueprints/catalog/lora.yaml`).

An adapter is served beside its base model by the same vLLM replicas; a request picks it by naming it in the OpenAI
`model` field. Its files are copied into the stack's model store like the base weights and onto each pod's local disk
at start (vLLM reads adapters from a local path only, never from s3://).
"""

from __future__ import annotations

from pydantic import Field

from blueprints.catalog import Architecture, Task
from blueprints.core import bounds
from blueprints.core.errors import FieldProblem, describe_pattern
from blueprints.requirements.fields import DNS_1123_LABEL, HF_REPO, MAX_WEIGHTS_URI_CHARS, S3_SEGMENT, Section

#: Where an adapter comes from: `s3://bucket/prefix/` or `hf://org/name`, as `model.weights_uri` spells them (an
#: adapter is a folder: `adapter_config.json` and `adapter_model.safetensors`, so no single-file https:// source).
ADAPTER_URI = describe_pattern(
    rf"^(s3://[a-z0-9][a-z0-9.\-]{{1,61}}[a-z0-9]/({S3_SEGMENT}(/{S3_SEGMENT})*/?)?|hf://{HF_REPO})$",
    "`s3://bucket/prefix/` (S3's safe characters; no empty, `.` or `..` segment) or `hf://org/name` (letters, "
    "digits, `_`, and single `-` or `.` between them)")


class LoraAdapter(Section):
    """One LoRA adapter of the model: requests naming `name` in the OpenAI `model` field are served with it."""

    name: str = Field(pattern=DNS_1123_LABEL, max_length=40, description="served name of the adapter (the OpenAI "
                      "`model` field of its requests; also its prefix in the model store), unique and not the base "
                      "model's served name")
    uri: str = Field(pattern=ADAPTER_URI, max_length=MAX_WEIGHTS_URI_CHARS, description="`s3://bucket/prefix/` or "
                     "`hf://org/name` of the adapter folder (adapter_config.json, adapter_model.safetensors)")
    rank: int = Field(ge=1, le=bounds.MAX_LORA_RANK, description="the adapter's LoRA rank (adapter_config.json "
                      "`r`), at most the pinned vLLM's largest --max-lora-rank; replicas get the smallest supported "
                      "slot rank at or above the largest adapter's (1, 8, 16, 32, 64, 128, 256, 320, 512)")


def adapter_problems(adapters: list[LoraAdapter], *, base_name: str, task: Task | None,
                     architecture: Architecture | None) -> list[FieldProblem]:
    """Why these adapters cannot be served on this model (empty when they can): names unique and not the base
    model's served name, a text-generation base (vLLM serves LoRA on generative models here) that
    is dense with a known `intermediate_size` (the slot memory is counted from it). Locations are below the model."""
    problems = []
    seen: set[str] = set()
    for i, adapter in enumerate(adapters):
        if adapter.name == base_name:
            problems.append(FieldProblem(("adapters", i, "name"), f"adapter name {adapter.name!r} is the base model's "
                                         "served name: requests naming it would reach the base model; rename the "
                                         "adapter", rule="unique-adapter-names"))
        elif adapter.name in seen:
            problems.append(FieldProblem(("adapters", i, "name"), f"adapter name {adapter.name!r} is given twice; "
                                         "give each adapter its own name", rule="unique-adapter-names"))
        seen.add(adapter.name)
    if adapters and task is not None and task.value != "text-generation":
        problems.append(FieldProblem("adapters", f"LoRA adapters are served by vLLM on a text-generation model; this "
                                     f"model's task is {task.value}: remove `adapters`", rule="adapters-servable"))
    elif adapters and architecture is not None and (architecture.experts or architecture.intermediate_size is None):
        why = ("a mixture-of-experts model (its expert LoRA layers are not sized here)" if architecture.experts
               else "an architecture without `intermediate_size` (config.json), which the adapters' GPU slots are "
               "sized from; add it")
        problems.append(FieldProblem("adapters", f"adapters need a dense model with a known MLP width; this is {why}",
                                     rule="adapters-servable"))
    return problems
