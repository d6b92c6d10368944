"""The search space: valid candidates over the contract's tunable knobs and validated patches.

A candidate sets every tunable knob and any subset of the patches. Coupled knobs move together:
when the contract has both a micro-batch and an accumulation knob, only combinations with
micro x accumulation (x processes per node) = the workload's global batch are valid, so the
tokens per optimizer step never change; with a micro-batch knob alone (the script derives the
accumulation), micro x processes must divide the global batch. A patch may be gated on a setting (``"nproc_per_node=2"``
for a DDP-only patch): it is valid only in candidates that hold that setting. A data loader's
persistent workers or prefetch factor is valid only beside worker processes (``NEEDS_WORKERS``).

Candidates are encoded relative to the baseline (baseline = the zero vector): one-hot columns for
categorical values other than the default, log2 plus one-hot deviations for power-of-two integers,
0/1 for booleans and patches. The accumulation knob of a coupled group gets no column: it is determined by the others.
Every encoding is a sum of per-setting deltas, ``encode(c) = indicator(c) @ deltas``, which lets
the models turn per-setting priors into coefficient priors and coefficients back into prices.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from infrarsi import batch
from infrarsi.contract import Contract, Knob, KnobValue
from infrarsi.settings import Setting, patch_key, setting_key
from infrarsi.trials import Candidate

NEEDS_WORKERS = ("dataloader_persistent", "dataloader_prefetch")
"""Knob roles torch's DataLoader takes only with worker processes: ``persistent_workers=True`` or a
``prefetch_factor`` with ``num_workers=0`` raises ValueError, so a candidate that sets one while
every loader-workers knob is 0 is not in the space (it would crash, teaching nothing)."""


@dataclass(frozen=True, slots=True)
class Column:
    """One feature column: which knob (or patch) it encodes and how."""

    dim: str
    kind: str
    """bool | log2 | onehot | patch"""
    value: KnobValue | None = None
    """For onehot: the domain value this column marks."""

    @property
    def name(self) -> str:
        return setting_key(self.dim, self.value) if self.kind == "onehot" and self.value is not None else self.dim


@dataclass(frozen=True, slots=True)
class CandidateSet:
    """Candidates with their keys, setting indicators and encoded features, row-aligned."""

    candidates: list[Candidate]
    keys: list[str]
    indicator: np.ndarray
    features: np.ndarray


def _count(value: KnobValue) -> int:
    """A workers knob's value as a count (0 when it is not a number)."""
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


def _is_power_of_two(value: KnobValue) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and value & (value - 1) == 0


def _encoding_kind(knob: Knob) -> str:
    values = [*knob.domain, knob.default]
    if knob.type == "bool":
        return "bool"
    if knob.type == "int" and all(_is_power_of_two(v) for v in values):
        return "log2"
    return "onehot"


def _knob_values(knob: Knob) -> list[KnobValue]:
    return list(knob.domain) if knob.tunable else [knob.default]


class SearchSpace:
    """Valid candidates, their encoding, and their per-setting structure."""

    def __init__(
        self,
        *,
        knobs: list[Knob],
        patches: list[str],
        patch_gates: dict[str, str | None],
        global_batch: int,
        planned_steps: int,
        budget_bytes: int,
        coupled: dict[str, Knob] | None = None,
    ):
        self.knobs = [k for k in knobs if k.tunable]
        self.patches = list(patches)
        self.patch_gates = {p: patch_gates.get(p) for p in self.patches}
        self.global_batch = global_batch
        self.planned_steps = planned_steps
        self.budget_bytes = budget_bytes
        self.coupled = dict(coupled or {})
        """Role -> knob for micro_batch and, when present, grad_accum and nproc_per_node."""
        self._defaults = {k.name: k.default for k in self.knobs}
        self._workers = [k for k in knobs if k.role == "dataloader_workers"]
        self._needs_workers = [k for k in knobs if k.role in NEEDS_WORKERS]
        self._group = self._group_combos()
        derived = self.coupled.get("grad_accum")
        self.derived = derived.name if derived is not None else None
        """The accumulation knob, which follows the others and gets no feature column."""
        self._encoded = [k for k in self.knobs if derived is None or k.name != derived.name]
        self._free = [k for k in self.knobs if k.name not in self._group_names()]
        self.columns = self._make_columns()
        self.setting_keys, self.setting_deltas = self._make_settings()
        self.setting_dims = [self._dim_of(self.knob_of(key)) for key in self.setting_keys]
        """The dimension each setting moves: its knob, ``patch:name``, or ``coupled`` for the group."""
        log2 = np.array([c.kind == "log2" for c in self.columns], dtype=bool)
        self.setting_log2 = self.setting_deltas[:, log2].sum(axis=1)
        """log2(value / default) of each setting of a power-of-two knob; 0 for every other setting."""
        self.setting_sides = np.sign(self.setting_log2).astype(int).tolist()
        """-1 / +1 where a power-of-two knob's value lies below / above its default (the sign of its
        log2 column); 0 where a setting's values have no order (categories, booleans, patches)."""
        self._key_index = {key: i for i, key in enumerate(self.setting_keys)}
        self._enumerated: CandidateSet | None = None

    @classmethod
    def from_contract(
        cls, contract: Contract, patches: list[str], patch_gates: dict[str, str | None] | None = None
    ) -> SearchSpace:
        roles = {}
        for role in ("micro_batch", "grad_accum", "nproc_per_node"):
            found = [k for k in contract.by_role(role) if not k.patch]  # a patch's split count splits, holds no batch
            if found:
                roles[role] = found[0]
        coupled = roles if "micro_batch" in roles else {}
        return cls(
            knobs=contract.knobs,
            patches=patches,
            patch_gates=dict(patch_gates or {}),
            global_batch=contract.workload.global_batch,
            planned_steps=contract.workload.planned_steps,
            budget_bytes=contract.memory.budget_bytes,
            coupled=coupled,
        )

    # --- structure -------------------------------------------------------------------------

    def _group_names(self) -> list[str]:
        return [k.name for k in self.coupled.values()]

    def _group_combos(self) -> list[dict[str, KnobValue]]:
        """Valid value combinations of the coupled knobs (tunable members only are set).

        With an accumulation knob, micro x accumulation x processes must equal the global batch (micro
        x accumulation, for a count the script divides by its processes: ``Knob.over_ranks``);
        without one the script derives the accumulation, so micro x processes must divide it.
        """
        roles, members = list(self.coupled), list(self.coupled.values())
        tunable = [k for k in members if k.tunable]
        if not tunable:
            return [{}]
        combos = []
        for values in itertools.product(*(_knob_values(k) for k in members)):
            split = {role: int(v) for role, v in zip(roles, values, strict=True)}
            micro, ranks = split["micro_batch"], split.get("nproc_per_node", 1)
            over = bool(self.coupled["grad_accum"].over_ranks) if "grad_accum" in split else False
            if ("grad_accum" in split and batch.keeps(self.global_batch, micro, split["grad_accum"], ranks, over)
                    or "grad_accum" not in split and batch.divides(self.global_batch, micro, ranks)):
                combos.append({k.name: v for k, v in zip(members, values, strict=True) if k.tunable})
        default = {k.name: k.default for k in tunable}
        if default not in combos:
            # The job as written is the baseline even if its own defaults break the rule.
            combos.insert(0, default)
        return combos

    def _make_columns(self) -> list[Column]:
        columns = []
        for knob in self._encoded:
            kind = _encoding_kind(knob)
            if kind != "onehot":
                columns.append(Column(knob.name, kind))
            if kind in ("onehot", "log2"):
                # For powers of two, one-hot deviations from the log2 trend: peak memory is not
                # linear in log2(micro-batch) (fixed weights + activations), yet the trend still
                # extrapolates to values not measured yet.
                columns += [Column(knob.name, "onehot", v) for v in knob.domain if v != knob.default]
        columns += [Column(patch_key(p), "patch") for p in self.patches]
        return columns

    def _column_values(self, knob: Knob, value: KnobValue) -> dict[int, float]:
        """Non-zero feature entries that ``knob = value`` contributes, relative to its default."""
        out = {}
        for j, col in enumerate(self.columns):
            if col.dim != knob.name:
                continue
            if col.kind == "bool":
                out[j] = float(bool(value)) - float(bool(knob.default))
            elif col.kind == "log2":
                out[j] = math.log2(int(value)) - math.log2(int(knob.default))
            elif value == col.value:
                out[j] = 1.0
        return {j: v for j, v in out.items() if v != 0.0}

    def _make_settings(self) -> tuple[list[str], np.ndarray]:
        keys: list[str] = []
        rows: list[np.ndarray] = []
        for knob in self._encoded:
            for value in knob.domain:
                if value == knob.default:
                    continue
                row = np.zeros(len(self.columns))
                for j, v in self._column_values(knob, value).items():
                    row[j] = v
                keys.append(setting_key(knob.name, value))
                rows.append(row)
        for p in self.patches:
            row = np.zeros(len(self.columns))
            row[self.columns.index(Column(patch_key(p), "patch"))] = 1.0
            keys.append(patch_key(p))
            rows.append(row)
        deltas = np.array(rows) if rows else np.zeros((0, len(self.columns)))
        return keys, deltas

    @property
    def n_features(self) -> int:
        return len(self.columns)

    def _dim_of(self, name: str) -> str:
        return "coupled" if name in self._group_names() else name

    def knob_of(self, key: str) -> str:
        """The dimension a setting key belongs to: the knob name or ``patch:name``."""
        return Setting.parse(key).dim

    # --- candidates ------------------------------------------------------------------------

    def baseline(self) -> Candidate:
        return Candidate(knobs=dict(self._defaults), patches=())

    def settings(self, candidate: Candidate) -> list[str]:
        """The candidate's non-baseline settings that the models see (derived knobs excluded)."""
        keys = [
            setting_key(k.name, candidate.knobs.get(k.name, k.default))
            for k in self._encoded
            if candidate.knobs.get(k.name, k.default) != k.default
        ]
        return keys + [patch_key(p) for p in self.patches if p in candidate.patches]

    def _gate_holds(self, patch: str, knobs: dict[str, KnobValue]) -> bool:
        gate = self.patch_gates.get(patch)
        if gate is None:
            return True
        held = Setting.parse(gate)
        return held.name in knobs and str(knobs[held.name]) == held.value

    def _loader_holds(self, knobs: dict[str, KnobValue]) -> bool:
        """No persistent workers or prefetch factor without a worker process (``NEEDS_WORKERS``);
        the job as written always holds."""
        def value(knob: Knob) -> KnobValue:
            return knobs.get(knob.name, knob.default)

        if (knobs == self._defaults or not self._workers
                or all(value(k) in (None, False) for k in self._needs_workers)):
            return True
        return any(_count(value(k)) > 0 for k in self._workers)

    def is_valid(self, candidate: Candidate) -> bool:
        if set(candidate.knobs) != set(self._defaults) or not set(candidate.patches) <= set(self.patches):
            return False
        for knob in self.knobs:
            value = candidate.knobs[knob.name]
            if value != knob.default and value not in knob.domain:
                return False
        group = {n: candidate.knobs[n] for n in self._group_names() if n in candidate.knobs}
        if group not in self._group or not self._loader_holds(candidate.knobs):
            return False
        return all(self._gate_holds(p, candidate.knobs) for p in candidate.patches)

    def _make(self, knobs: dict[str, KnobValue], patches: set[str]) -> Candidate:
        return Candidate(knobs=dict(knobs), patches=tuple(p for p in self.patches if p in patches))

    def _knob_rows(self) -> list[dict[str, KnobValue]]:
        rows = []
        for combo in self._group:
            for values in itertools.product(*(k.domain for k in self._free)):
                row = {**combo, **{k.name: v for k, v in zip(self._free, values, strict=True)}}
                if self._loader_holds(row):
                    rows.append(row)
        return rows

    def size(self) -> int:
        return sum(
            2 ** sum(self._gate_holds(p, row) for p in self.patches) for row in self._knob_rows()
        )

    def all_candidates(self) -> list[Candidate]:
        out = []
        for row in self._knob_rows():
            allowed = [p for p in self.patches if self._gate_holds(p, row)]
            for bits in itertools.product((False, True), repeat=len(allowed)):
                out.append(self._make(row, {p for p, on in zip(allowed, bits, strict=True) if on}))
        return out

    def sample(self, rng: np.random.Generator, n: int) -> list[Candidate]:
        """Up to ``n`` distinct valid candidates, each dimension drawn uniformly."""
        seen: dict[str, Candidate] = {}
        for _ in range(n * 4):
            if len(seen) >= n:
                break
            row = dict(self._group[int(rng.integers(len(self._group)))])
            for knob in self._free:
                row[knob.name] = knob.domain[int(rng.integers(len(knob.domain)))]
            patches = {p for p in self.patches if self._gate_holds(p, row) and rng.random() < 0.5}
            cand = self._make(row, patches)
            if self.is_valid(cand):
                seen.setdefault(cand.key(), cand)
        return list(seen.values())

    def neighbours(self, candidate: Candidate) -> list[Candidate]:
        """Candidates that differ in one thing: one knob (coupled knobs as one), or one patch."""
        out = []
        patches = set(candidate.patches)
        group_names = self._group_names()
        current_group = {n: candidate.knobs[n] for n in group_names if n in candidate.knobs}
        for combo in self._group:
            if combo != current_group:
                out.append(self._make({**candidate.knobs, **combo}, patches))
        for knob in self._free:
            for value in knob.domain:
                if value != candidate.knobs[knob.name]:
                    out.append(self._make({**candidate.knobs, knob.name: value}, patches))
        for p in self.patches:
            out.append(self._make(candidate.knobs, patches ^ {p}))
        return [c for c in out if self.is_valid(c)]

    def with_value(self, candidate: Candidate, name: str, value: KnobValue) -> Candidate | None:
        """``candidate`` with knob ``name`` set to ``value``; coupled knobs follow (the
        accumulation first), patches whose gate no longer holds are dropped. None: no valid way."""
        knobs = {**candidate.knobs, name: value}
        if name in self._group_names():
            matches = [c for c in self._group if c.get(name) == value]
            if not matches:
                return None
            nearest = min(matches, key=lambda combo: sum(combo[k] != candidate.knobs[k]
                                                         for k in combo if k != self.derived))
            knobs.update(nearest)
        patches = {p for p in candidate.patches if self._gate_holds(p, knobs)}
        cand = self._make(knobs, patches)
        return cand if self.is_valid(cand) else None

    def knob_grid(self, fixed: dict[str, KnobValue]) -> list[Candidate]:
        """Every patch-free candidate that holds the ``fixed`` knob values."""
        rows = self._knob_rows()
        return [self._make(r, set()) for r in rows if all(r.get(k) == v for k, v in fixed.items())]

    # --- encoding --------------------------------------------------------------------------

    def indicator(self, candidates: list[Candidate]) -> np.ndarray:
        """Rows: candidates; columns: ``setting_keys``; 1 where the candidate holds the setting."""
        out = np.zeros((len(candidates), len(self.setting_keys)))
        for i, cand in enumerate(candidates):
            for key in self.settings(cand):
                j = self._key_index.get(key)
                if j is not None:
                    out[i, j] = 1.0
        return out

    def encode_many(self, candidates: list[Candidate]) -> np.ndarray:
        return self.indicator(candidates) @ self.setting_deltas

    def encode(self, candidate: Candidate) -> np.ndarray:
        return self.encode_many([candidate])[0]

    def candidate_set(self, candidates: list[Candidate]) -> CandidateSet:
        indicator = self.indicator(candidates)
        return CandidateSet(candidates, [c.key() for c in candidates], indicator, indicator @ self.setting_deltas)

    def enumerated(self) -> CandidateSet:
        """Every valid candidate, computed once."""
        if self._enumerated is None:
            self._enumerated = self.candidate_set(self.all_candidates())
        return self._enumerated
