"""The patch library: one source patch per module, applied to a trial's isolated work tree.

``REGISTRY`` maps each patch's name (its module's name) to the patch, in the order they are
applied. Names ``llm:<id>`` refer to unified diffs stored at ``.infrarsi/patches/<id>.diff``
(see ``diff_patch``). Every application returns a :class:`PatchOutcome`; nothing here raises for
a patch that does not apply or fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from infrarsi.contract import Contract, Knob
from infrarsi.patches.activation_checkpointing import ActivationCheckpointing
from infrarsi.patches.autocast_bf16 import AutocastBf16
from infrarsi.patches.base import (
    APPLIED,
    FAILED,
    SKIPPED,
    Patch,
    PatchError,
    PatchOutcome,
    Site,
    diff_hunks,
)
from infrarsi.patches.channels_last import ChannelsLast
from infrarsi.patches.compile_model import CompileModel
from infrarsi.patches.ddp_no_sync import DdpNoSync
from infrarsi.patches.diff_patch import LLM_PREFIX, apply_diff
from infrarsi.patches.gradient_accumulation import GradientAccumulation
from infrarsi.patches.moe_batched_dispatch import MoeBatchedDispatch
from infrarsi.patches.optimizer_foreach import OptimizerForeach
from infrarsi.patches.optimizer_fused import OptimizerFused
from infrarsi.patches.pinned_memory import PinnedMemory
from infrarsi.patches.scope import scope_violation
from infrarsi.patches.sdpa_attention import SdpaAttention
from infrarsi.patches.tf32_matmul import Tf32Matmul
from infrarsi.patches.zero_grad_set_to_none import ZeroGradSetToNone
from infrarsi.priors.builtin import declared_prior
from infrarsi.priors.types import Prior
from infrarsi.project import editable_python
from infrarsi.records.files import patch_dir

__all__ = [
    "REGISTRY", "Patch", "PatchOutcome", "Site", "applicable", "declared_priors", "find_sites", "apply_patches", "patch_knobs",
    "existing_knob",
    "APPLIED", "SKIPPED", "FAILED",
]

REGISTRY: dict[str, Patch] = {
    p.name: p
    for p in (
        SdpaAttention(),
        MoeBatchedDispatch(),
        OptimizerForeach(),
        OptimizerFused(),
        ZeroGradSetToNone(),
        ActivationCheckpointing(),
        CompileModel(),
        DdpNoSync(),
        Tf32Matmul(),
        AutocastBf16(),
        ChannelsLast(),
        PinnedMemory(),
        GradientAccumulation(),
    )
}


def declared_priors(device: str) -> dict[str, Prior]:
    """Each library patch's own belief (``Patch.prior``) on ``device``, the machine's kind (cpu,
    cuda), as the priors the search starts from."""
    return {name: declared_prior(name, patch.prior[device], device) for name, patch in REGISTRY.items()}


def existing_knob(patch: Patch, contract: Contract) -> str | None:
    """Why a gated patch is left to the script's own knob, or None."""
    if patch.gate_role is None:
        return None
    knobs = [k for k in contract.by_role(patch.gate_role) if k.patch != patch.name]
    if not knobs:
        return None
    return f"the script already has a {patch.gate_role} knob ({knobs[0].name}); the search tunes it instead"


def _left_to_a_knob(name: str, contract: Contract) -> bool:
    """The script's own knob does the patch's work (``existing_knob``), or the contract has the knob
    the patch adds, whose values other than the default apply it (``Knob.patch``): either way the
    patch is no search dimension of its own."""
    return bool(existing_knob(REGISTRY[name], contract)) or any(k.patch == name for k in contract.knobs)


def patch_knobs(sources: Mapping[str, str], contract: Contract) -> list[Knob]:
    """The knobs library patches would add that the search tunes (``Patch.knob_off``), as contract
    knobs: the script as written at their default, the patch applied at any other value. A patch a
    run would not try here (``Patch.refusal``) adds none: the run then lists it skipped, with why.
    ``sources``: the editable Python files, path → text (``project.editable_sources``)."""
    out = []
    for name, patch in REGISTRY.items():
        if patch.knob_off is None or existing_knob(patch, contract) or patch.refusal(contract.memory.device, sources):
            continue
        for rel, source in sources.items():
            try:
                added = patch.transform(rel, source).knobs
            except PatchError:
                continue
            batch = contract.workload.global_batch
            for knob in added:
                values = [v for v in knob.domain if not batch or not isinstance(v, int) or batch % v == 0]
                values = sorted({patch.knob_off, *values})
                out.append(replace(knob, default=patch.knob_off, domain=values, tunable=len(values) >= 2, patch=name))
            if added:
                break
    return out


def may_apply(name: str, source: str, contract: Contract | None, device: str) -> bool:
    """Whether library patch ``name`` may have a site in ``source`` for this contract and device:
    the cheap test the run (before its codemods) and the editor (for a document) share. Not a patch
    left to the script's own knob or tuned by the knob it adds, nor a GPU-only one on a CPU."""
    if contract is not None and _left_to_a_knob(name, contract):
        return False
    patch = REGISTRY[name]
    return not (patch.gpu_only and device != "cuda") and patch.may_apply(source)


def find_sites(sources: Mapping[str, str], contract: Contract) -> list[tuple[str, Site]]:
    """``(patch name, site)`` for every place a library patch applies in the editable ``sources``
    (path → text: ``Project.sources``)."""
    found: list[tuple[str, Site]] = []
    for name, patch in REGISTRY.items():
        if _left_to_a_knob(name, contract):
            continue
        for rel, source in sources.items():
            found.extend((name, site) for site in patch.sites(rel, source))
    return found


def applicable(sources: Mapping[str, str], contract: Contract, device: str) -> tuple[list[str], dict[str, str]]:
    """The library patches a run on ``device`` tries (each with a site in the editable ``sources``),
    and those with a site it does not try, with why (``Patch.refusal``)."""
    found = {name for name, _site in find_sites(sources, contract)}
    tried, refused = [], {}
    for name, patch in REGISTRY.items():
        if name in found:
            why = patch.refusal(device, sources)
            if why:
                refused[name] = why
            else:
                tried.append(name)
    return tried, refused


def apply_patches(
    workdir: Path,
    names: Sequence[str],
    contract: Contract,
    device: str,
    *,
    diff_dir: Path | None = None,
) -> list[PatchOutcome]:
    """Apply ``names`` in order to the editable files in ``workdir`` (an isolated copy) and write them.

    Each patch sees the files as the patches before it left them. ``llm:<id>`` diffs are read
    from ``diff_dir`` (default ``workdir/.infrarsi/patches``).
    """
    workdir = Path(workdir)
    diff_dir = Path(diff_dir) if diff_dir is not None else patch_dir(workdir)
    outcomes = []
    for name in names:
        if name.startswith(LLM_PREFIX):
            outcome = apply_diff(workdir, diff_dir / f"{name[len(LLM_PREFIX):]}.diff", contract, name=name)
        else:
            outcome = _apply_one(workdir, name, contract, device)
        outcomes.append(outcome)
    return outcomes


def _apply_one(workdir: Path, name: str, contract: Contract, device: str) -> PatchOutcome:
    patch = REGISTRY.get(name)
    if patch is None:
        return PatchOutcome(name, FAILED, f"unknown patch {name!r}; known: {', '.join(REGISTRY)}")
    if patch.gpu_only and device != "cuda":
        return PatchOutcome(name, SKIPPED, f"GPU-only patch: it means nothing on {device}")
    existing = existing_knob(patch, contract)
    if existing:
        return PatchOutcome(name, SKIPPED, existing)
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    knobs = []
    for rel in editable_python(workdir, contract):
        source = (workdir / rel).read_text()
        try:
            result = patch.transform(rel, source)
        except PatchError as err:
            return PatchOutcome(name, FAILED, f"{rel}: {err}")
        if result.sites and result.code != source:
            before[rel], after[rel] = source, result.code
            knobs.extend(result.knobs)
    if not after:
        return PatchOutcome(name, SKIPPED, "does not apply: no site in the editable files")
    for rel, code in after.items():
        violation = scope_violation(rel, before[rel], code, contract)
        if violation:
            return PatchOutcome(name, FAILED, violation, breaks_contract=True)
        try:
            compile(code, rel, "exec")
        except SyntaxError as err:
            return PatchOutcome(name, FAILED, f"the patched {rel} does not compile: {err}")
    for rel, code in after.items():
        (workdir / rel).write_text(code)
    hunks = [h for rel in after for h in diff_hunks(rel, before[rel], after[rel])]
    return PatchOutcome(name, APPLIED, "", changed=after, hunks=hunks, knobs=knobs)
