"""Source patches proposed by an Anthropic model as unified diffs, checked before any trial.

The model gets the goal, the workload's invariants, the doctor profile and the editable sources,
and must call ``propose_patches`` with a list of ``{title, rationale, diff}``. A reply without
exactly that structure is an ERROR result; nothing is stored. Each diff is then checked
statically, and refused with the status a trial of it would have ended with, at no trial cost:

- ``contract``: touches a locked or out-of-scope file (or a function outside the scope), carries
  one of git's extended headers (mode change, new or deleted file, rename, copy, binary patch),
  or fails a check on the patched file's syntax tree (``static_checks``): it changes the loss or
  the probe calls or when the training step runs, patches the clock or an imported module, touches
  the import system, starts processes, ends the process, or reaches outside the work tree — the
  loss invariant and the measurement are the contract's, and a patch may make the job faster,
  not redefine what it optimizes or how it is timed;
- ``crash``: the diff is malformed, does not apply to the current sources, or does not compile.

What cannot be seen reliably in a diff — tokens per step, the loss values — the one-time
validation trial of each accepted diff catches (``contract``, ``numerics``). Accepted diffs are
stored at ``.infrarsi/patches/<id>.diff`` (InfraRSI's state, never the user's tree) and named
``llm:<id>``, where ``<id>`` is the first 8 hex digits of the diff's sha256.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infrarsi.contract import Contract
from infrarsi.llm import MalformedReply, call_tool, doctor_for_model
from infrarsi.patches.base import APPLIED
from infrarsi.patches.diff_patch import LLM_PREFIX, DiffError, DiffRefused, apply_diff, parse_unified_diff
from infrarsi.patches.diff_patch import diff_id as _content_id
from infrarsi.project import Project
from infrarsi.records.doctor import DoctorReport
from infrarsi.records.files import patch_dir, proposals_path

if TYPE_CHECKING:
    from anthropic.types import ToolParam

TOOL_NAME = "propose_patches"
MAX_PATCHES = 5
"""Each accepted diff costs one validation trial; more than this per request are not taken."""
MAX_SOURCE_CHARS = 60_000
MAX_DOCTOR_CHARS = 8_000
MAX_TITLE_CHARS = 120

SYSTEM = """\
You are an ML infrastructure engineer making a PyTorch training job faster without changing what
it computes. Propose source patches as unified diffs against the editable files exactly as given
(paths relative to the repository, `--- a/<path>` / `+++ b/<path>` headers, correct hunk line
counts, exact context lines). Never touch locked files, never change the batch, the sequence
length, the tokens per step, the number of steps, the loss computation, or the `probe.` calls
that measure the steps. Answer only by calling the propose_patches tool, once; an empty list is
a valid answer."""


@dataclass(frozen=True, slots=True)
class ProposedPatch:
    id: str
    """First 8 hex digits of the diff's sha256; the patch's name is ``llm:<id>``."""
    title: str
    rationale: str
    diff: str
    path: Path
    """Where the diff is stored: ``<repo>/.infrarsi/patches/<id>.diff``."""

    @property
    def name(self) -> str:
        return LLM_PREFIX + self.id


@dataclass(frozen=True, slots=True)
class Rejection:
    """A proposal refused before any trial; ``status`` is what a trial of it would have ended with."""

    id: str
    title: str
    status: str
    """contract | crash."""
    reason: str

    @property
    def name(self) -> str:
        return LLM_PREFIX + self.id


@dataclass(slots=True)
class ProposalResult:
    status: str
    """ok | error."""
    reason: str = ""
    """On error: not_configured | timeout | connection | rate_limited | api_error | malformed."""
    message: str = ""
    patches: list[ProposedPatch] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.patches]


def tool_definition() -> ToolParam:
    entry = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "a few words: what the patch does"},
            "rationale": {"type": "string", "description": "why it should be faster here"},
            "diff": {"type": "string", "description": "unified diff against the editable sources as given"},
        },
        "required": ["title", "rationale", "diff"],
    }
    return {
        "name": TOOL_NAME,
        "description": f"Propose up to {MAX_PATCHES} source patches, each as a unified diff.",
        "input_schema": {
            "type": "object",
            "properties": {"patches": {"type": "array", "items": entry, "maxItems": MAX_PATCHES}},
            "required": ["patches"],
        },
    }


def _doctor_summary(doctor: DoctorReport) -> str:
    return json.dumps(doctor_for_model(doctor), default=str)[:MAX_DOCTOR_CHARS]


def _cut(text: str, limit: int) -> str:
    # a diff against a cut file cannot apply past the cut; say where it is
    return text if len(text) <= limit else text[:limit] + f"\n# … cut here ({len(text) - limit} more chars)"


def prompt(project: Project, goal: str) -> str:
    contract, sources = project.contract, project.sources
    w = contract.workload
    per_file = MAX_SOURCE_CHARS // max(len(sources), 1)
    listing = "\n".join(f"=== {rel}\n{_cut(text, per_file)}" for rel, text in sources.items())
    scope = ", ".join(contract.scope.functions) or "whole files"
    return "\n\n".join([
        f"Goal: {goal}",
        f"Device: {contract.memory.device}. Workload (fixed, must not change): {w.tokens_per_step} tokens per "
        f"optimizer step, global batch {w.global_batch}, sequence length {w.seq_len}, "
        f"{w.warmup_steps} warm-up + {w.measured_steps} measured steps, command {' '.join(w.command)}.",
        f"Editable files: {', '.join(sources) or '(none)'} (scope: {scope}). "
        f"Locked files (never touch): {', '.join(contract.scope.locked) or '(none)'}.",
        "Doctor profile (JSON):\n" + _doctor_summary(project.doctor),
        "Editable sources:\n" + listing,
    ])


def parse_entries(data: Any) -> list[dict[str, str]]:
    """The ``{title, rationale, diff}`` entries of the tool call's input, or :class:`MalformedReply`."""
    if not isinstance(data, dict) or not isinstance(data.get("patches"), list):
        raise MalformedReply(f"{TOOL_NAME} input must be an object with a 'patches' list")
    entries = []
    for i, item in enumerate(data["patches"]):
        if not isinstance(item, dict):
            raise MalformedReply(f"patches[{i}] must be an object")
        for key in ("title", "rationale", "diff"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise MalformedReply(f"patches[{i}].{key} must be a non-empty string")
        entries.append({k: item[k] for k in ("title", "rationale", "diff")})
    return entries


def _normalized(diff: str) -> str:
    # git apply calls a diff whose last line has no newline corrupt
    return diff if diff.endswith("\n") else diff + "\n"


def diff_id(diff: str) -> str:
    return _content_id(_normalized(diff))


def static_problem(repo: Path, contract: Contract, diff: str) -> tuple[str, str] | None:
    """``(status, reason)`` when ``diff`` must not reach a trial, or None."""
    try:
        files = parse_unified_diff(diff)
    except DiffRefused as err:
        return "contract", f"contract: {err.kind}: the diff {err}"
    except DiffError as err:
        return "crash", f"malformed diff: {err}"
    # The diff must apply to the sources as they are now: try it on a scratch copy of its files,
    # their bytes as a trial's work tree copies them (line endings, encoding), which the decoded
    # ``Project.sources`` do not keep.
    # apply_diff refuses locked and out-of-scope files, runs the static checks on the patched
    # files and checks that they compile.
    with tempfile.TemporaryDirectory(prefix="infrarsi-llm-") as tmp:
        scratch = Path(tmp) / "tree"
        scratch.mkdir()
        for f in files:
            source = repo / f.path
            if source.is_file():
                (scratch / f.path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, scratch / f.path)
        diff_path = Path(tmp) / "proposal.diff"
        diff_path.write_text(diff)
        outcome = apply_diff(scratch, diff_path, contract)
    if outcome.status == APPLIED:
        return None
    return ("contract" if outcome.breaks_contract else "crash"), outcome.reason


def _judge(repo: Path, contract: Contract, entries: list[dict[str, str]]) -> ProposalResult:
    result = ProposalResult(status="ok")
    seen = set()
    for entry in entries[:MAX_PATCHES]:
        diff = _normalized(entry["diff"])
        pid, title = diff_id(diff), entry["title"].strip()[:MAX_TITLE_CHARS]
        if pid in seen:
            continue  # the same diff twice is one proposal
        seen.add(pid)
        problem = static_problem(repo, contract, diff)
        if problem:
            result.rejected.append(Rejection(id=pid, title=title, status=problem[0], reason=problem[1]))
            continue
        path = patch_dir(repo) / f"{pid}.diff"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(diff)
        result.patches.append(ProposedPatch(id=pid, title=title, rationale=entry["rationale"].strip(),
                                            diff=diff, path=path))
    result.message = (f"{len(result.patches)} proposed patches accepted for validation, "
                      f"{len(result.rejected)} refused before any trial")
    if len(entries) > MAX_PATCHES:
        result.message += f"; {len(entries) - MAX_PATCHES} beyond the first {MAX_PATCHES} not considered"
    return result


def propose_patches(project: Project, goal: str) -> ProposalResult:
    """Ask the project's model (``Project.llm``) for patches and check each; never raises for a
    failed request."""
    config = project.llm
    if not config.configured:
        return ProposalResult(status="error", reason="not_configured", message="no Anthropic API key configured")
    reply = call_tool(config, tool_definition(), prompt(project, goal), parse_entries, system=SYSTEM)
    if not reply.ok or reply.value is None:  # an ok reply holds its parsed entries
        return ProposalResult(status="error", reason=reply.reason, message=f"anthropic:{config.model}: {reply.message}")
    return _judge(project.repo, project.contract, reply.value)


def _cache_key(project: Project, goal: str) -> str:
    """Changes when the question would: another goal, model, scope or editable source."""
    contract = project.contract
    basis = {"goal": goal, "model": project.llm.model, "sources": dict(project.sources),
             "locked": sorted(contract.scope.locked),
             "functions": contract.scope.functions}
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def _from_cache(repo: Path, key: str) -> ProposalResult | None:
    try:
        data = json.loads(proposals_path(repo).read_text())
        if data["key"] != key:
            return None
        patches = []
        for p in data["patches"]:
            path = patch_dir(repo) / f"{p['id']}.diff"
            patches.append(ProposedPatch(id=p["id"], title=p["title"], rationale=p["rationale"],
                                         diff=path.read_text(), path=path))
        rejected = [Rejection(**r) for r in data["rejected"]]
        return ProposalResult(status="ok", message=data["message"], patches=patches, rejected=rejected)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, stale or damaged: ask again


def cached_proposals(project: Project, goal: str) -> ProposalResult:
    """:func:`propose_patches`, asked once per goal, model and source state; the answer is kept in
    ``.infrarsi/patches/proposals.json`` so that running again does not ask (nor pay) again."""
    repo = project.repo
    key = _cache_key(project, goal)
    cached = _from_cache(repo, key)
    if cached is not None:
        return cached
    result = propose_patches(project, goal)
    if result.status == "ok":  # a failed request is not an answer; the next run asks again
        data = {"key": key, "goal": goal, "model": project.llm.model, "message": result.message,
                "patches": [{"id": p.id, "title": p.title, "rationale": p.rationale} for p in result.patches],
                "rejected": [asdict(r) for r in result.rejected]}
        path = proposals_path(repo)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")
    return result
