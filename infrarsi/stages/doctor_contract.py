"""The contract completed from what doctor's baseline runs measured.

What init could not read off the code, the launcher counts in the baseline runs: the tokens and
samples of a step, the model's shape, the steps of an epoch. An evaluation batch whose evaluations
no measured step reaches is taken out of the search.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from infrarsi.contract import Contract
from infrarsi.events import Event, EventSink, ignore
from infrarsi.records.doctor import DoctorError
from infrarsi.runner import abort
from infrarsi.trials import TrialResult


def measured_contract(contract: Contract, runs: list[TrialResult], on_event: EventSink) -> Contract:
    """The contract with what the baseline runs so far measured: the workload, the real length,
    whether evaluations are reached."""
    contract = with_measured_workload(contract, runs)
    contract = with_measured_length(contract, runs, on_event)
    return with_evaluations_measured(contract, runs, on_event)


def with_measured_workload(contract: Contract, runs: list[TrialResult]) -> Contract:
    """Fill in what init could not derive (tokens per step, sequence length, global batch: 0 in
    the contract) from what the launcher counted in the baseline runs, and the model's shape from
    the facts the script gave the probe (``with_model_shape``). A workload without tokens (images,
    audio) is held to its samples per step instead."""
    contract = with_model_shape(contract, runs[0].model_facts if runs else {})
    w = contract.workload
    if w.tokens_per_step and w.seq_len and w.global_batch:
        return contract
    tokens = {r.tokens_per_step for r in runs}
    samples = {r.samples_per_step for r in runs}
    sequences = next(iter(samples)) if len(samples) == 1 and None not in samples else 0
    if not w.tokens_per_step and tokens == {None} and sequences:
        return replace(contract, workload=replace(w, samples_per_step=sequences,
                                                  global_batch=w.global_batch or sequences))
    counted = {t for t in tokens if t is not None}
    if len(tokens) != 1 or not counted:
        raise DoctorError(
            "the contract does not know the tokens per step and the launcher did not count them "
            f"consistently in the baseline runs (tokens {sorted(tokens, key=str)}, samples "
            f"{sorted(samples, key=str)}): the first module the job calls must take the batch as its "
            "first tensor argument"
        )
    tokens_per_step = w.tokens_per_step or counted.pop()
    # Integer inputs of shape (sequences, length): the sequence length is their ratio.
    seq_len = w.seq_len or int(runs[0].model_facts.get("seq_len", 0)) or (
        tokens_per_step // sequences if sequences and tokens_per_step % sequences == 0 else 0)
    if not seq_len:
        raise DoctorError("the contract does not know the sequence length and the launcher could not tell it: "
                          "call probe.model(..., seq_len=…) in the script")
    global_batch = w.global_batch or sequences or tokens_per_step // seq_len
    return replace(contract, workload=replace(w, tokens_per_step=tokens_per_step, seq_len=seq_len,
                                              global_batch=global_batch))


def with_model_shape(contract: Contract, facts: Mapping[str, int]) -> Contract:
    """The hidden size, heads, layers and parameters the script's ``probe.model`` reported, over
    init's reading of the knobs' names (``catalog.shape_of``): the priors price selective
    recomputation (``infrarsi.priors.attention_core``) and a GPU's activations
    (``infrarsi.priors.activation_bytes``) from them."""
    w = contract.workload
    heads, head_dim = int(facts.get("heads", 0)), int(facts.get("head_dim", 0))
    layers, params = int(facts.get("layers", 0)), int(facts.get("params", 0))
    known = heads > 0 and head_dim > 0
    return replace(contract, workload=replace(
        w, hidden=heads * head_dim if known else w.hidden, heads=heads if known else w.heads,
        layers=layers if layers > 0 else w.layers, params=params if params > 0 else w.params))


def with_measured_length(contract: Contract, runs: list[TrialResult], on_event: EventSink = ignore) -> Contract:
    """An epoch-counted job's length: its epochs x the steps an epoch the launcher counted (the
    training loader's length over the batches a step draws), the same in every baseline run."""
    w = contract.workload
    if not w.epochs:
        return contract
    counted = {r.steps_per_epoch for r in runs}
    alike = {n for n in counted if n is not None}
    if len(counted) != 1 or not alike:
        on_event(Event("doctor", "log", f"the job runs {w.epochs} epochs, but the steps an epoch were not counted "
                                        f"alike in the baseline runs ({sorted(counted, key=str)}): it stays "
                                        f"{w.planned_steps} steps"))
        return contract
    per_epoch = alike.pop()
    planned = w.epochs * per_epoch
    said = f"{w.planned_from} x {per_epoch} steps an epoch (the training loader's length, counted by doctor)"
    on_event(Event("doctor", "log", f"the real job: {planned} steps = {said}"))
    return replace(contract, workload=replace(w, planned_steps=planned, planned_from=said, epochs=0))


def with_evaluations_measured(contract: Contract, runs: list[TrialResult], on_event: EventSink = ignore) -> Contract:
    """An evaluation's batch is searched only where a trial's measured steps reach an evaluation:
    with no measured step of the baseline runs carrying periodic work, what it changes (the
    evaluation's time and its memory) is never measured, and a promotion could carry an evaluation
    batch no run ever held. Warm-up steps do not count: their extra work is mostly warming up."""
    evals = [k.name for k in contract.tunable if k.role == "eval_batch"]
    if not evals or abort.periodic_steps([r.step_times for r in runs]):
        return contract
    note = (f"{', '.join(evals)}: the batch of an evaluation that no trial's measured steps reach (none of the "
            "baseline runs' carried periodic work), so its time and memory are never measured: not searched")
    on_event(Event("doctor", "log", note))
    w = contract.workload
    return replace(contract, knobs=[replace(k, tunable=False) if k.name in evals else k for k in contract.knobs],
                   workload=replace(w, notes=[*w.notes, note]))
