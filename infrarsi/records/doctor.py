"""doctor's record: the baseline as measured, written as ``.infrarsi/doctor.json``.

Plain values with their load/save (no torch: the report, the language server and the bank read
it); ``infrarsi.stages.doctor`` measures it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from infrarsi.background import Background
from infrarsi.contract import KnobValue
from infrarsi.noise import LossSpread, SpreadPrior, StepNoise
from infrarsi.records.files import doctor_path
from infrarsi.records.hardware import HardwareFingerprint, PeakFlops

SCHEMA_VERSION = 2


class DoctorError(RuntimeError):
    """The baseline could not be measured (a run failed, or doctor.json is missing or stale)."""


@dataclass(kw_only=True, slots=True)
class BaselineRun:
    """One run of the unchanged baseline."""

    status: str
    step_times: list[float]
    median_step_s: float
    step_cv: float
    startup_s: float | None
    wall_s: float
    peak_bytes: int | None
    log_path: str
    param_checksum: list[float] | None = None
    """[sum, sum of squares] in float64 of the parameters after the run (the launcher's exit record)."""
    process_s: float | None = None
    """Launch to exit of the whole process, by InfraRSI's clock."""


@dataclass(kw_only=True, slots=True)
class PhaseSplit:
    """Where a step's time goes: mean seconds per measured step, over every baseline run."""

    step_s: float
    """Mean step time (the phases are means, so they are compared with a mean)."""
    phases: dict[str, float]
    """Probe phases in the probe's order; phases the script never entered are absent."""
    other_s: float
    """Step time outside every phase (logging, synchronisation, Python between phases)."""
    coverage: float
    """Sum of the phases over the step time."""
    covered: bool
    """Whether the phases sum to the step time within the stage's ``PHASE_TOLERANCE``."""

    def shares(self) -> dict[str, float]:
        """Each phase's, and 'other''s, fraction of the step, largest first."""
        parts = {**self.phases, "other": max(self.other_s, 0.0)}
        return dict(sorted(((k, v / self.step_s) for k, v in parts.items()), key=lambda kv: -kv[1]))


@dataclass(kw_only=True, slots=True)
class Efficiency:
    tokens_per_step: int
    tokens_per_s: float
    projected_job_s: float
    """Start-up plus the contract's planned steps at the median step time."""
    devices: int
    """Devices the peak is multiplied by (GPUs in the job; 1 for the CPU)."""
    flops_per_token: float | None
    """6N + 12·L·H·Q·T; None when the script does not report its model (probe.model)."""
    achieved_flops: float | None
    peak: PeakFlops | None
    mfu: float | None
    samples_per_step: int | None = None
    samples_per_s: float | None = None
    """Samples (sequences, images…) per second: the throughput of workloads without tokens."""
    flops_per_step: float | None = None
    """All ranks' FLOPs per step that MFU uses, from ``mfu_source``."""
    mfu_source: str = ""
    """FlopCounterMode (counted by the launcher on a warm-up step, any model) | 6N+12LHQT (the probe's
    model facts) | "" (no MFU)."""
    flops_per_step_6n: float | None = None
    """6N + 12·L·H·Q·T times the tokens per step: the cross-check, where the probe reports the model."""
    machine_peak: PeakFlops | None = None
    """One device of the machine at its best (``hardware.machine_peak``: a CPU's every core in its
    fastest dtype, a GPU's fastest dtype; every GPU of the machine counts, ``HardwareFingerprint.gpu_count``);
    None in a doctor.json older than it."""
    peaks: list[PeakFlops] = field(default_factory=list)
    """The job's peak (its threads, one device) in each precision a candidate's matmuls may run in
    (``hardware.precision_peaks``: a CPU's measured for every dtype it has units for, a GPU's from its
    datasheet), ``peak`` among them: a bf16 candidate's MFU is read against the bf16 one. Empty in a
    doctor.json older than it."""


@dataclass(kw_only=True, slots=True)
class MemoryUse:
    peak_bytes: int
    """Largest peak over the baseline runs (of the largest rank)."""
    budget_bytes: int
    """Per rank."""
    device: str
    ranks: int = 1

    @property
    def fraction(self) -> float:
        return self.peak_bytes / self.budget_bytes


@dataclass(kw_only=True, slots=True)
class ReorderRun:
    """The baseline with another micro-batch split: its effect on the losses is float noise."""

    knobs: dict[str, KnobValue]
    status: str
    max_deviation: float | None
    """Largest |loss − reference| over the compared steps (None when the run failed)."""
    detail: str = ""


@dataclass(kw_only=True, slots=True)
class DoctorReport:
    """Everything doctor measured; written as ``.infrarsi/doctor.json``."""

    created: str
    contract_hash: str
    """The contract's digest after doctor wrote the reference losses into it."""
    hardware: HardwareFingerprint
    runs: list[BaselineRun]
    noise: StepNoise
    phases: PhaseSplit
    memory: MemoryUse
    losses: LossSpread
    reorder: ReorderRun | None
    efficiency: Efficiency
    param_checksum: list[float] | None = None
    """The baseline's parameters after its steps ([sum, sum of squares], float64, hashed in
    InfraRSI's process): what a candidate that trains the same model ends near."""
    verification_steps: list[int] = field(default_factory=list)
    """The two lengths verification runs every arm at (short, long), chosen from these runs' step
    time and whole-process spread (``whole_process.Lengths.of``)."""
    checksums: dict[int, list[float]] = field(default_factory=dict)
    """The same after each length a trial may run (the contract's, and verification's short one),
    by step count: a run of that length is held to it. Never shown to the job or a model."""
    reassociation_drift: dict[int, float] = field(default_factory=dict)
    """How far the reassociation run's parameters ended from the baseline's at the length it ran
    (verification's long one), in ``accounting.checksum_drift``'s relative units: a run that only
    reorders float sums drifts this far, which the parameter check allows for at that length."""
    model_facts: dict[str, int] = field(default_factory=dict)
    """What the script reported of its model (``probe.model``: parameters, layers, heads…): the
    experience bank's workload signature is built from them."""
    findings: list[str] = field(default_factory=list)
    """Where the time goes, in sentences, largest first."""
    warnings: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    launches: int = 0
    """Whole processes doctor launched (its reruns of disturbed ones included)."""
    sandbox: str = ""
    """How the baseline ran: bubblewrap, or off (--no-sandbox)."""
    background: Background | None = None
    """The machine's normal background: other processes' use of the job's cores before and while
    the baseline ran; a trial disturbed beyond it is rerun (None: a doctor.json older than it)."""
    reference_pair: list[dict] = field(default_factory=list)
    """The baseline's runs at verification's short and long lengths (``TrialResult.to_dict``): the
    first baseline round of every verification, never run again (empty: none measured)."""
    round_cv: float | None = None
    """The relative spread of one verification round's job time these runs lead to expect
    (``Lengths.round_cv``): how many rounds verification plans (``Rounds.sized``)."""

    startup_limit_s: float | None = None
    """The longest start-up a verification run of a candidate that declares none may have before
    it is judged disturbed (``accounting.startup_limit``): an earlier run left the machine slower."""
    claims: list[dict[str, str]] = field(default_factory=list)
    """The model's role claims about knobs the rules left unknown, as doctor's trials judged them
    (``knobs.llm_roles.Claim`` as a dict; stages/claims.py)."""
    schema_version: int = SCHEMA_VERSION

    @property
    def repeats(self) -> int:
        return len(self.runs)

    @property
    def spread_prior(self) -> SpreadPrior | None:
        """``round_cv`` as the prior verification's intervals are moderated toward, believed as
        many degrees of freedom as the baseline runs it came from less one."""
        return SpreadPrior(cv=self.round_cv, df=max(0, self.noise.runs - 1)) if self.round_cv else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["hardware"] = self.hardware.to_dict()
        data["phases"]["shares"] = self.phases.shares()
        data["memory"]["fraction"] = self.memory.fraction
        return data

    @classmethod
    def from_dict(cls, data: dict) -> DoctorReport:
        if data.get("schema_version") != SCHEMA_VERSION:
            raise DoctorError(f"doctor.json has schema {data.get('schema_version')!r}; run `infrarsi doctor` again")
        eff = dict(data["efficiency"])
        eff["peak"] = PeakFlops.from_dict(eff["peak"]) if eff.get("peak") else None
        eff["machine_peak"] = PeakFlops.from_dict(eff["machine_peak"]) if eff.get("machine_peak") else None
        eff["peaks"] = [PeakFlops.from_dict(p) for p in eff.get("peaks", [])]
        phases = {k: v for k, v in data["phases"].items() if k != "shares"}
        memory = {k: v for k, v in data["memory"].items() if k != "fraction"}
        return cls(
            created=data["created"],
            contract_hash=data["contract_hash"],
            hardware=HardwareFingerprint.from_dict(data["hardware"]),
            runs=[BaselineRun(**r) for r in data["runs"]],
            noise=StepNoise.from_dict(data["noise"]),
            phases=PhaseSplit(**phases),
            memory=MemoryUse(**memory),
            losses=LossSpread.from_dict(data["losses"]),
            reorder=ReorderRun(**data["reorder"]) if data.get("reorder") else None,
            efficiency=Efficiency(**eff),
            param_checksum=data.get("param_checksum"),
            verification_steps=[int(n) for n in data.get("verification_steps", [])],
            checksums={int(k): list(v) for k, v in data.get("checksums", {}).items()},
            reassociation_drift={int(k): float(v) for k, v in data.get("reassociation_drift", {}).items()},
            model_facts={k: int(v) for k, v in data.get("model_facts", {}).items()},
            findings=list(data.get("findings", [])),
            warnings=list(data.get("warnings", [])),
            wall_s=float(data.get("wall_s", 0.0)),
            launches=int(data.get("launches", 0)),
            sandbox=str(data.get("sandbox", "")),
            background=Background.from_dict(data["background"]) if data.get("background") else None,
            reference_pair=[dict(r) for r in data.get("reference_pair", [])],
            round_cv=data.get("round_cv"),
            startup_limit_s=data.get("startup_limit_s"),
            claims=[dict(c) for c in data.get("claims", [])],
            schema_version=data["schema_version"],
        )


def load_doctor(repo: Path) -> DoctorReport | None:
    """The last doctor report, or None when doctor has not run; DoctorError when it is unreadable."""
    path = doctor_path(repo)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as err:
        raise DoctorError(f"{path} is not valid JSON ({err}); run `infrarsi doctor {repo}` again") from None
    return DoctorReport.from_dict(data)


def save_doctor(report: DoctorReport, repo: Path) -> Path:
    path = doctor_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    tmp.replace(path)
    return path
