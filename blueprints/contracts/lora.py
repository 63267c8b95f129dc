"""LoRA serving in a stack config (`engine.lora` of a vllm-gpu blueprint): the adapters, the slots the engine
allocates for them, the vLLM flags they render to, and the local disk their copies take. Shared by the planner
(which chooses the slots), the stack-config checks and the component (which renders the flags), so all three read
the same numbers.
"""

from __future__ import annotations

import math

from pydantic import Field, model_validator

from blueprints.catalog import Architecture
from blueprints.catalog.lora import load_lora_catalog
from blueprints.contracts.memory import GIB, LoraSlots, lora_elements_per_rank
from blueprints.core import bounds
from blueprints.core.errors import FieldProblem, raise_problems
from blueprints.core.jsontypes import ClosedModel
from blueprints.requirements.adapters import ADAPTER_URI, LoraAdapter
from blueprints.requirements.fields import DNS_1123_LABEL, MAX_WEIGHTS_URI_CHARS

#: Where each pod's adapters are copied at start (`<LORA_MOUNT>/<name>`): vLLM loads an adapter from an absolute local
#: path (vllm/lora/utils.py:314-341), never from s3://.
LORA_MOUNT = "/adapters"


class ServedAdapter(ClosedModel):
    """One adapter the replicas serve: its served name (`--lora-modules name=<LORA_MOUNT>/name`), source and rank."""

    name: str = Field(pattern=DNS_1123_LABEL, max_length=40, description="served name; also models/<name>/ in the store")
    source_uri: str = Field(pattern=ADAPTER_URI, max_length=MAX_WEIGHTS_URI_CHARS, description="where the adapter "
                            "is copied from into the model store")
    rank: int = Field(ge=1, le=bounds.MAX_LORA_RANK, description="the adapter's LoRA rank")


class LoraEngine(ClosedModel):
    """vLLM's LoRA settings: `--enable-lora`, `--lora-modules`, `--max-loras`, `--max-lora-rank`, `--max-cpu-loras`
    (vllm 0.24.0; sources in blueprints/catalog/lora.yaml)."""

    adapters: list[ServedAdapter] = Field(min_length=1, max_length=bounds.MAX_LORA_ADAPTERS,
                                          description="served beside the base model")
    max_loras: int = Field(ge=1, le=bounds.MAX_LORA_ADAPTERS, description="--max-loras: adapters in one batch "
                           "(GPU slots)")
    max_lora_rank: int = Field(ge=1, le=bounds.MAX_LORA_RANK, description="--max-lora-rank: the slot rank, one of vLLM's supported "
                               "ranks, at least every adapter's")
    max_cpu_loras: int = Field(ge=1, le=bounds.MAX_LORA_ADAPTERS, description="--max-cpu-loras: adapters kept in host memory (>= max_loras)")

    @model_validator(mode="after")
    def _consistent(self) -> LoraEngine:
        catalog = load_lora_catalog()
        problems = []
        if self.max_lora_rank not in catalog.supported_ranks:
            problems.append(FieldProblem("max_lora_rank", f"max_lora_rank={self.max_lora_rank} is not one vLLM "
                                         f"accepts ({', '.join(map(str, catalog.supported_ranks))}; "
                                         "vllm/config/lora.py:26)"))
        for i, a in enumerate(self.adapters):
            if a.rank > self.max_lora_rank:
                problems.append(FieldProblem(("adapters", i, "rank"), f"adapter {a.name} has rank {a.rank}, above "
                                             f"max_lora_rank={self.max_lora_rank}: vLLM refuses to load it; raise "
                                             "max_lora_rank or re-plan"))
        names = [a.name for a in self.adapters]
        for i, name in enumerate(names):
            if name in names[:i]:
                problems.append(FieldProblem(("adapters", i, "name"), f"adapter name {name!r} is given twice"))
        if self.max_loras > len(self.adapters):
            problems.append(FieldProblem("max_loras", f"max_loras={self.max_loras} is more slots than the "
                                         f"{len(self.adapters)} adapters: each slot takes GPU memory; lower it"))
        if self.max_cpu_loras < self.max_loras:
            problems.append(FieldProblem("max_cpu_loras", f"max_cpu_loras={self.max_cpu_loras} is below max_loras="
                                         f"{self.max_loras}: vLLM refuses to start (vllm/config/lora.py:112-116)"))
        raise_problems(problems)
        return self

    @property
    def slots(self) -> LoraSlots:
        return LoraSlots(self.max_loras, self.max_lora_rank)


def lora_engine(adapters: list[LoraAdapter] | None) -> LoraEngine | None:
    """The LoRA settings the planner gives these adapters (None without adapters): a slot per adapter up to
    `lora.yaml` default_max_loras, the smallest supported slot rank at or above the largest adapter rank, and every
    adapter in host memory (`max_cpu_loras` = their number)."""
    if not adapters:
        return None
    catalog = load_lora_catalog()
    rank = catalog.slot_rank(max(a.rank for a in adapters))
    if rank is None:  # the requirements refuse it first (adapter-rank-served)
        raise ValueError(f"no vLLM slot rank holds rank {max(a.rank for a in adapters)}")
    return LoraEngine(adapters=[ServedAdapter(name=a.name, source_uri=a.uri, rank=a.rank) for a in adapters],
                      max_loras=min(len(adapters), catalog.default_max_loras), max_lora_rank=rank,
                      max_cpu_loras=len(adapters))


def lora_slots(adapters: list[LoraAdapter] | None) -> LoraSlots | None:
    """The GPU slots `lora_engine` gives these adapters (None without adapters): what the capacity model's KV budget
    subtracts (`blueprints.contracts.memory.kv_cache_tokens`)."""
    lora = lora_engine(adapters)
    return lora.slots if lora is not None else None


def lora_args(lora: LoraEngine) -> list[str]:
    """The `vllm serve` flags serving `lora`'s adapters from their local copies: `--enable-lora`, then ONE
    `--lora-modules` followed by every `name=path` (the flag's parser replaces its list on each use,
    vllm/entrypoints/openai/cli_args.py:35-66), `--max-loras`, `--max-lora-rank`, `--max-cpu-loras`."""
    return ["--enable-lora", "--lora-modules", *(f"{a.name}={LORA_MOUNT}/{a.name}" for a in lora.adapters),
            f"--max-loras={lora.max_loras}", f"--max-lora-rank={lora.max_lora_rank}",
            f"--max-cpu-loras={lora.max_cpu_loras}"]


def adapter_gib(arch: Architecture, rank: int) -> float:
    """Disk one adapter of `rank` takes at most, GiB: every wrapped module of `arch` (whole, TP 1) at `rank`, in
    the bytes per element `lora.yaml` assumes a saved adapter has (fp32). Example: Llama-3.1-8B at rank 16:
    16 x 2,886,144 x 4 B = 0.172 GiB."""
    return rank * lora_elements_per_rank(arch, 1) * load_lora_catalog().adapter_file_bytes_per_element / GIB


def adapters_volume_gib(arch: Architecture | None, lora: LoraEngine | None) -> int:
    """The pod's local adapters volume, whole GiB (0 without adapters): every adapter's `adapter_gib` +10 % and 1 GiB
    of slack (config and tokenizer files an adapter may ship); the slack alone for a shape the slots cannot be sized
    from (`lora_problems` refuses it). Example: partner-api's ranks 16 and 32 on Llama-3.1-8B: 0.52 GiB -> 2."""
    if lora is None:
        return 0
    dense = arch is not None and arch.intermediate_size is not None and not arch.experts
    files = sum(adapter_gib(arch, a.rank) for a in lora.adapters) if dense else 0.0  # type: ignore[arg-type]
    return math.ceil(files * 1.1 + 1)


def lora_reason(lora: LoraEngine, base_name: str, *, slot_gib_per_gpu: float) -> str:
    """The rationale line: which adapters, how requests reach them, the slots and what they cost in GPU memory."""
    names = ", ".join(f"{a.name} (rank {a.rank})" for a in lora.adapters)
    return (f"LoRA: {len(lora.adapters)} adapter(s) on {base_name}: {names}; a request picks one by its OpenAI "
            f"`model` field (`{base_name}` is the base model); {lora.max_loras} GPU slot(s) of rank "
            f"{lora.max_lora_rank} take {slot_gib_per_gpu:.2f} GiB per GPU (slot buffers and CUDA graphs captured "
            f"again with adapters) out of the KV cache; all {lora.max_cpu_loras} stay in host memory")


def lora_problems(lora: LoraEngine, *, base_name: str, arch: Architecture | None) -> list[FieldProblem]:
    """A stack config's LoRA settings against its model (locations below `engine.lora`): no adapter named as the
    base model (its requests would reach the base), and a dense architecture with `intermediate_size`, which the
    slots are sized from. The memory they take is checked with the KV cache (`consistency._kv_fit`)."""
    problems = [FieldProblem(("adapters", i, "name"), f"adapter name {a.name!r} is the base model's served name: "
                             "requests naming it would reach the base model; rename the adapter")
                for i, a in enumerate(lora.adapters) if a.name == base_name]
    if arch is not None and (arch.experts or arch.intermediate_size is None):
        problems.append(FieldProblem("adapters", "LoRA adapters need a dense model with a known intermediate_size "
                                     "(the slots' GPU memory is sized from it); remove engine.lora or re-plan"))
    return problems
