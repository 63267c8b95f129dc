"""`blueprint benchmark --prompts FILE.jsonl`: the user's own prompts, replayed instead of the random dataset.

The file: one request per line, a JSON object with `max_tokens` (the output tokens the request generates: the
client sends `--ignore-eos`, so every finalist does the same work; put the logged completion tokens here) and either
`prompt` (a string) or `messages` (OpenAI chat messages, `{"role", "content"}` with string content). Checked where it
enters (`load_prompts`): size, line count, each line's size, the keys, `max_tokens` within the stack's
`max_model_len`; a bad line is a BenchmarkError naming the file, the line and the field. The content is never logged,
printed or recorded: the result file keeps the file's sha256, its line count and length statistics only
(`PromptsRecord`).

How the pinned client replays it (vLLM v0.24.0, read in the sdist, sha256 0862453a...ac66, `vllm/benchmarks/`):

- `--dataset-name custom` (datasets/datasets.py:1617, the `--dataset-name` choices) reads `--dataset-path`
  (:1633) with `CustomDataset` (:2468): JSONL only (the path must end in `.jsonl`, :2497), a `prompt` column required
  (:2501), `output_tokens` per line used when `--custom-output-len -1` (:1663-1669, :2553-2568). Lines are
  shuffled with `--seed` (:2516-2517) and, when a run sends more requests than the file holds, drawn again at random
  (`maybe_oversample_requests`, :2590, :313-318): a repeated prompt may find its tokens in the prefix cache.
- A `prompt` line on a stack serving the chat API is sent as one user message (the random dataset's prompts are
  too); a `messages` line on one serving the completions API is refused (a completions client sends a prompt).
- The prompt is wrapped in the chat template client-side unless `--skip-chat-template` (:1645, :2573-2579); the
  `openai-chat` backend then sends it as one user message (lib/endpoint_request_func.py:350-353) and the server
  applies the template itself, so the client skips it (else it would be applied twice); the `openai` backend sends
  the raw prompt to /v1/completions, as a completions client does.
- `custom` takes one prompt per request: no message list (`SampleRequest.chat_messages`, datasets.py:89-92, is set
  only by the BFCL loader, :4612-4622). A line of one user message is sent as it is; a line of several messages
  (a system prompt, earlier turns) cannot be: refused unless `--approximate-workload`, which joins their contents
  into one user message and lists it among the result's approximations.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from blueprints.contracts.benchmark_result import PromptsRecord
from blueprints.core.errors import BenchmarkError, read_file_bytes
from blueprints.core.yamlio import load_json

#: Largest prompts file read, bytes (the Kubernetes Job further caps what it mounts: `CONFIGMAP_MAX_BYTES`).
MAX_PROMPTS_FILE_BYTES = 64 * 1024 * 1024
#: Most lines (requests) of a prompts file.
MAX_PROMPT_LINES = 100_000
#: Largest line, bytes: a 128k-token prompt is about 512 KB of text.
MAX_LINE_BYTES = 1024 * 1024
#: Most messages of one line.
MAX_MESSAGES = 256
#: Kubernetes refuses a ConfigMap whose data exceeds 1 MiB ("The data stored in a ConfigMap cannot exceed 1 MiB",
#: https://kubernetes.io/docs/concepts/configuration/configmap/, checked 2026-12-07; the API server's
#: `validation.ValidateConfigMap`, `MaxSecretSize` 1 MiB on the summed key and value bytes).
CONFIGMAP_MAX_BYTES = 1024 * 1024
#: Where the client reads the replayed prompts: `--dataset-path` (CustomDataset takes a `.jsonl` path only).
PROMPTS_DIR_IN_POD, PROMPTS_FILE = "/prompts", "prompts.jsonl"
#: The roles a chat message may have (OpenAI's chat completions API).
ROLES = ("system", "developer", "user", "assistant")
KEYS = ("prompt", "messages", "max_tokens")


@dataclass(frozen=True)
class ReplayedPrompts:
    """A checked prompts file, in the client's format.

    Attributes:
        path: the file given.
        custom_jsonl: what the client reads (`--dataset-name custom`): one `{"prompt", "output_tokens"}` per line.
        record: what the result file keeps (sha256, counts, length statistics; no content).
        approximations: what the client cannot send as the file says (messages joined into one user message).
        notes: where the replay differs from the file (repeated prompts), for the report.
    """

    path: Path
    custom_jsonl: str
    record: PromptsRecord
    approximations: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def lines(self) -> int:
        return self.record.lines


def _fail(path: Path, line: int | None, where: str, message: str) -> BenchmarkError:
    at = f"line {line}: " if line is not None else ""
    return BenchmarkError(f"--prompts {path}: {at}{where}: {message}")


def _percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    k = max(0, math.ceil(p / 100 * len(ordered)) - 1)
    return float(ordered[k])


def _stats(values: list[int]) -> tuple[float, float, float]:
    return round(sum(values) / len(values), 1), _percentile(values, 50), _percentile(values, 95)


def _is_text(value: object) -> bool:
    """A non-blank string the client can send: JSON's `\\ud800` escapes decode to lone surrogates, which are not
    Unicode text and cannot be encoded as UTF-8 (the ConfigMap, the request body)."""
    if not isinstance(value, str) or not value.strip():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _prompt_of(path: Path, n: int, data: dict, *, approximate: bool, chat: bool) -> tuple[str, bool]:
    """The line's prompt text and whether its messages were joined into one (`approximate`)."""
    if ("prompt" in data) == ("messages" in data):
        raise _fail(path, n, "prompt/messages", "give exactly one of `prompt` (a string) or `messages` (chat "
                    "messages)")
    if "prompt" in data:
        prompt = data["prompt"]
        if not _is_text(prompt):
            raise _fail(path, n, "prompt", "expected a non-empty string of Unicode text (no lone surrogate escapes "
                        "such as \\ud800)")
        return prompt, False
    messages = data["messages"]
    if not chat:
        raise _fail(path, n, "messages", "the stack serves the completions API (model.traffic.api completions), "
                    "which takes a prompt: give `prompt`, the text your completions clients send")
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        raise _fail(path, n, "messages", f"expected a list of 1-{MAX_MESSAGES} chat messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise _fail(path, n, f"messages[{i}]", "expected an object with `role` and `content` only")
        if message["role"] not in ROLES:
            raise _fail(path, n, f"messages[{i}].role", f"expected one of {', '.join(ROLES)}")
        if not _is_text(message["content"]):
            raise _fail(path, n, f"messages[{i}].content", "expected a non-empty string of Unicode text (text only, "
                        "no lone surrogate escapes such as \\ud800)")
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"], False
    if not approximate:
        raise _fail(path, n, "messages", f"{len(messages)} message(s) ({', '.join(m['role'] for m in messages)}): "
                    "vLLM 0.24.0's custom dataset sends one user message per request; give one user message, or "
                    "pass --approximate-workload to send their contents joined into one (the result file says so "
                    "and `blueprint calibrate` refuses it)")
    return "\n\n".join(m["content"] for m in messages), True


def load_prompts(path: Path, *, max_model_len: int, approximate: bool = False, chat: bool = True) -> ReplayedPrompts:
    """Read and check a prompts file (module docstring), in the client's format.

    Args:
        path: the JSONL file.
        max_model_len: the stack's context window, tokens: every `max_tokens` must be below it.
        approximate: join a line's several messages into one user message instead of refusing it.
        chat: the client calls the chat API (`openai-chat`: a `prompt` is sent as one user message); False: the
            completions API, where a `messages` line is refused.

    Raises:
        BenchmarkError: the file is missing, not a regular file (a FIFO or device is never read), larger than
            `MAX_PROMPTS_FILE_BYTES`, has more than `MAX_PROMPT_LINES` lines or none, or a line is too long, not a
            JSON object (or one nested too deep, with a number of too many digits or a key given twice:
            `blueprints.core.yamlio.load_json`), or misses or mistypes a field (the message
            names the file, the line number and the field; never the content).
    """
    raw = read_file_bytes(path, BenchmarkError, "--prompts file", max_bytes=MAX_PROMPTS_FILE_BYTES,
                          too_large="replay a sample")
    size = len(raw)
    out: list[str] = []
    prompt_chars: list[int] = []
    max_tokens: list[int] = []
    joined = 0
    # Line ends as text editors write them (\n, \r\n or \r); a UTF-8 byte order mark before the first line is no
    # content (Windows editors write one).
    for n, line in enumerate(raw.removeprefix(b"\xef\xbb\xbf").splitlines(), 1):
        if not line.strip():
            continue
        if len(out) >= MAX_PROMPT_LINES:
            raise _fail(path, n, "file", f"more than {MAX_PROMPT_LINES:,} requests: replay a sample")
        if len(line) > MAX_LINE_BYTES:
            raise _fail(path, n, "line", f"{len(line):,} bytes, more than {MAX_LINE_BYTES:,}")
        try:
            data = load_json(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise _fail(path, n, "line", "not UTF-8") from None
        except json.JSONDecodeError as exc:
            raise _fail(path, n, "line", f"not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(data, dict):
            raise _fail(path, n, "line", "expected a JSON object with `prompt` or `messages` and `max_tokens`")
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise _fail(path, n, unknown[0], f"unknown key; a line holds {', '.join(KEYS)} only")
        prompt, was_joined = _prompt_of(path, n, data, approximate=approximate, chat=chat)
        joined += was_joined
        if "max_tokens" not in data:
            raise _fail(path, n, "max_tokens", "missing: the output tokens the request generates")
        tokens = data["max_tokens"]
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens < max_model_len:
            raise _fail(path, n, "max_tokens", f"expected an integer 1-{max_model_len - 1} (the stack's "
                        f"max_model_len is {max_model_len}: the prompt and the output must fit it)")
        out.append(json.dumps({"prompt": prompt, "output_tokens": tokens}, ensure_ascii=False))
        prompt_chars.append(len(prompt))
        max_tokens.append(tokens)
    if not out:
        raise _fail(path, None, "file", "no request: one JSON object per line")
    chars = _stats(prompt_chars)
    outputs = _stats(max_tokens)
    record = PromptsRecord(
        file=path.name, sha256=hashlib.sha256(raw).hexdigest(), bytes=size, lines=len(out),
        messages_joined=joined, prompt_chars_mean=chars[0], prompt_chars_p50=chars[1], prompt_chars_p95=chars[2],
        max_tokens_mean=outputs[0], max_tokens_p50=outputs[1], max_tokens_p95=outputs[2])
    approximations = (f"--prompts: {joined} of {len(out)} request(s) have several chat messages, sent joined into one "
                      "user message (vLLM 0.24.0's custom dataset sends one per request)",) if joined else ()
    return ReplayedPrompts(path, "\n".join(out) + "\n", record, approximations)


def repeat_note(prompts: ReplayedPrompts, num_prompts: tuple[int, ...]) -> tuple[str, ...]:
    """A note when a run sends more requests than the file holds (the client samples prompts again)."""
    most = max(num_prompts)
    if most <= prompts.lines:
        return ()
    return (f"--prompts: a run sends up to {most} requests and the file holds {prompts.lines}: the client repeats "
            "prompts, and a repeated prompt may find its tokens in the prefix cache",)


def check_configmap_size(prompts: ReplayedPrompts) -> None:
    """Refuse prompts the Kubernetes Job cannot mount (a ConfigMap's data is at most `CONFIGMAP_MAX_BYTES`)."""
    size = len(prompts.custom_jsonl.encode("utf-8"))
    if size > CONFIGMAP_MAX_BYTES:
        raise BenchmarkError(f"--prompts {prompts.path}: {size:,} bytes as the client reads them, more than the "
                             f"{CONFIGMAP_MAX_BYTES:,} a Kubernetes ConfigMap holds (the Job mounts them from one); "
                             "replay a sample of fewer or shorter prompts")
