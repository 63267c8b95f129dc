"""What a LoRA adapter change does to a running vLLM stack: which adapters were added, removed or changed (source or
rank) and the slots, and that every pod restarts.

The adapters reach the pods through the pod template (the `--lora-modules` and slot flags of the engine container and
the `fetch-adapters` init container; `components.vllm_service`), and a Deployment rolls out exactly when its pod
template changes (kubernetes.io/docs/concepts/workloads/controllers/deployment: "A Deployment's rollout is triggered
if and only if the Deployment's Pod template (.spec.template) is changed"). So any adapter change restarts every
replica, one surge at a time; new or changed adapters are first copied into the model store by their sync Job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AdapterChange:
    """The LoRA adapters of one stack, before -> after: names added, removed, changed (same name, other source or
    rank), and the GPU slots (`<max_loras> x rank <max_lora_rank>`, None on a side without adapters)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    slots_before: str | None = None
    slots_after: str | None = None

    @property
    def message(self) -> str:
        """One sentence: what changed and that every pod restarts."""
        parts = [f"{what} {', '.join(names)}" for what, names in
                 (("added", self.added), ("removed", self.removed), ("changed", self.changed)) if names]
        if self.slots_before != self.slots_after:
            parts.append(f"GPU slots {self.slots_before or 'none'} -> {self.slots_after or 'none'}")
        copied = "; a new or changed adapter's sync Job copies it into the model store first" \
            if self.added or self.changed else ""
        return (f"LoRA adapters change ({'; '.join(parts)}): they are in the pod template (vLLM's --lora-modules and "
                "slot flags, the fetch-adapters init container), so every pod restarts, one surge at a time (a "
                f"rolling update){copied}")

    def to_json(self) -> dict[str, Any]:
        return {"added": list(self.added), "removed": list(self.removed), "changed": list(self.changed),
                "slots_before": self.slots_before, "slots_after": self.slots_after, "restarts_pods": True,
                "message": self.message}


def _lora(blueprint: dict[str, Any] | None) -> dict[str, Any]:
    return ((blueprint or {}).get("engine") or {}).get("lora") or {}


def _slots(lora: dict[str, Any]) -> str | None:
    return f"{lora['max_loras']} x rank {lora['max_lora_rank']}" if lora else None


def adapter_change(before: dict[str, Any] | None, after: dict[str, Any]) -> AdapterChange | None:
    """The adapter change between two recorded blueprints (stack-config dicts), None when `engine.lora` is the same
    on both sides (or absent on both)."""
    b, a = _lora(before), _lora(after)
    if b == a:
        return None
    old = {x["name"]: x for x in b.get("adapters", [])}
    new = {x["name"]: x for x in a.get("adapters", [])}
    return AdapterChange(added=tuple(n for n in new if n not in old), removed=tuple(n for n in old if n not in new),
                         changed=tuple(n for n in new if n in old and new[n] != old[n]),
                         slots_before=_slots(b), slots_after=_slots(a))
