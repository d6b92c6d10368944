"""The task contract: what a trial must keep fixed for its speed-up to be honest.

Written once by init to ``.infrarsi/contract.toml``, hashed, and checked before every trial.
Loading validates every field; a bad one raises :class:`ContractError` naming it. The owner's
policy tables, ``[sandbox]`` and ``[verify]``, are written by hand and kept out of the hash.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

import tomli_w

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Section = TypeVar("_Section", bound="DataclassInstance")

SCHEMA_VERSION = 1
STATE_DIR = ".infrarsi"
CONTRACT_FILE = "contract.toml"

KnobValue = bool | int | float | str
LAUNCHERS = ("python", "torchrun", "accelerate")
ATTENTION_KINDS = ("", "eager", "fused")

# Knob roles the catalog knows; "workload" knobs are invariants, "unknown" ones stay fixed.
ROLES = (
    "micro_batch",
    "grad_accum",
    "threads",
    "activation_checkpointing",
    "compile",
    "dtype",
    "optimizer_impl",
    "dataloader_workers",
    "ddp_bucket_mb",
    "ddp_grad_as_bucket_view",
    "ddp_static_graph",
    "nproc_per_node",
    "attention_impl",
    "moe_dispatch",
    "zero_grad",
    "fsdp",
    "tensor_parallel",
    "pipeline_parallel",
    "virtual_pipeline",
    "sequence_parallel",
    "expert_parallel",
    "dataloader_pin_memory",
    "dataloader_prefetch",
    "dataloader_persistent",
    "preprocessing_workers",
    "eval_batch",
    "matmul_precision",
    "cudnn_benchmark",
    "allocator",
    "logging",
    "steps",
    "workload",
    "unknown",
)


class ContractError(ValueError):
    """A contract that cannot be used; ``field`` names the offending entry."""

    def __init__(self, field: str, message: str, path: Path | None = None):
        self.field = field
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}contract field '{field}': {message}")


@dataclass(kw_only=True, slots=True)
class Knob:
    name: str
    """The script's name for it (argparse dest, global name or dataclass field)."""
    role: str
    """One of ROLES."""
    type: str
    """bool | int | float | str."""
    default: KnobValue
    flag: str = ""
    """How a value is passed on the command line (``--batch_size``); empty: written into source."""
    flag_style: str = "eq"
    """eq: ``--k=v``; store_true / store_false: the bare flag or nothing; bool_optional: ``--k`` / ``--no-k``;
    env: a launcher setting, ``flag`` names its environment variable (infrarsi/launcher/settings.py)."""
    domain: list[KnobValue] = field(default_factory=list)
    """Values the search may try (empty: fixed at default)."""
    tunable: bool = False
    help: str = ""
    source: str = ""
    """Where it is defined, ``file:line``."""
    patch: str | None = None
    """The library patch that adds this knob to a script without it (``gradient_accumulation``):
    the default is the script as it is, any other value applies the patch and then sets the knob
    (``runner.command.patches_to_apply``). None: the script has the knob itself."""
    over_ranks: bool | None = None
    """For ``grad_accum``: True when the script divides the count by its process count (nanoGPT's
    ``gradient_accumulation_steps //= ddp_world_size``), so it counts every rank's micro-batches and
    micro-batch x it is the global batch whatever the process count. None: each rank's count (left
    out of the contract, whose hash it does not change)."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ContractError(f"knobs.{self.name}.role", f"unknown role {self.role!r}")
        if self.type not in ("bool", "int", "float", "str"):
            raise ContractError(f"knobs.{self.name}.type", f"unknown type {self.type!r}")
        if self.tunable and not self.domain:
            raise ContractError(f"knobs.{self.name}.domain", "a tunable knob needs a domain")
        if self.flag_style not in ("eq", "store_true", "store_false", "bool_optional", "env"):
            raise ContractError(f"knobs.{self.name}.flag_style", f"unknown style {self.flag_style!r}")

    @property
    def source_path(self) -> str:
        """The file of ``source`` (empty: none recorded)."""
        return self.source.rpartition(":")[0] if ":" in self.source else self.source

    @property
    def source_line(self) -> int:
        """The line of ``source`` (0: none recorded)."""
        tail = self.source.rpartition(":")[2]
        return int(tail) if ":" in self.source and tail.isdigit() else 0

    def render(self, value: KnobValue) -> list[str]:
        """The command-line arguments that set this knob to ``value`` (empty: none needed)."""
        if self.flag_style == "env":
            return []
        if self.flag_style == "store_true":
            return [self.flag] if value else []
        if self.flag_style == "store_false":
            return [] if value else [self.flag]
        if self.flag_style == "bool_optional":
            return [self.flag if value else "--no-" + self.flag.removeprefix("--")]
        return [f"{self.flag}={value}"]


@dataclass(kw_only=True, slots=True)
class Workload:
    entry: str
    """Entry-point script, relative to the repo root."""
    command: list[str]
    """Base argv run from ``cwd`` (``python train.py``, ``torchrun …``, or the owner's own command
    given after ``--``); a knob's flag replaces the command's own setting of it, else is appended."""
    cwd: str = "."
    """Where the command runs, relative to the repo root."""
    launcher: str = "python"
    """python | torchrun | accelerate (``accelerate launch``)."""
    module: str = ""
    """For ``python -m pkg.train``: the module name (``entry`` is its file)."""
    command_from: str = "init"
    """init: the command init chose; user: the owner's command, given after ``--``."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables every run sets (the command's ``K=V`` prefix)."""
    overrides: dict[str, KnobValue] = field(default_factory=dict)
    """Knob values every trial sets so that the job runs on this machine (a device it has);
    ``notes`` says why. Flag knobs are passed on the command line, others written into source."""
    notes: list[str] = field(default_factory=list)
    """What init changed about the baseline and why, for the report."""
    knob_style: str = "argparse"
    """argparse | globals | dataclass | nested (a config node or Hydra config overridden by path) |
    click | typer | fire (a command function's parameters): how the entry point reads its knobs."""
    args: dict[str, KnobValue] = field(default_factory=dict)
    """Flags every trial passes (e.g. the step count), by flag name without dashes (written back with
    the dashes its knob's flag has: a Hydra path has none)."""
    tokens_per_step: int
    """Global tokens per optimizer step; every trial must report exactly this. 0: init could not
    derive it from the knob defaults, doctor sets it from the probe."""
    seq_len: int
    """0: unknown (see tokens_per_step)."""
    global_batch: int
    """Sequences per optimizer step (all micro-batches, all ranks); 0: unknown."""
    global_batch_knob: str = ""
    """The knob holding the global batch; empty when it is derived (micro-batch x accumulation) or unknown."""
    seq_len_knob: str = ""
    """The knob holding the sequence length; empty when unknown."""
    hidden: int = 0
    """The model's hidden size; 0: unknown (init reads it off a model knob's name, doctor from the
    probe's model facts)."""
    heads: int = 0
    """Its attention heads; 0: unknown (as ``hidden``)."""
    layers: int = 0
    """Its transformer layers; 0: unknown (as ``hidden``)."""
    params: int = 0
    """Its parameters, experts included; 0: unknown (doctor reads the probe's model facts)."""
    attention: str = ""
    """How its attention keeps the scores: "fused" where the code calls a fused kernel (SDPA,
    FlashAttention: none kept), "eager" where it takes the softmax itself, "" unknown
    (``knobs/attention.py``)."""
    samples_per_step: int | None = None
    """Global samples per step (images, clips…) as the launcher counts them, for workloads without
    tokens (doctor sets it); None: not fixed, a token workload is held to ``tokens_per_step``."""
    seed: int
    warmup_steps: int
    measured_steps: int
    planned_steps: int
    """How many steps the real job runs: start-up costs are amortized over this."""
    planned_from: str = ""
    """Where ``planned_steps`` came from, in words (a step knob, ``--planned-steps``, epochs x the
    steps an epoch doctor measured, or the trial's own length for want of either)."""
    epochs: int = 0
    """The job's epoch count when its length is counted in epochs only (no step knob): doctor measures
    the steps an epoch and sets ``planned_steps`` (and this to 0); 0 otherwise."""

    def __post_init__(self) -> None:
        if not self.command:
            raise ContractError("workload.command", "must not be empty")
        if self.launcher not in LAUNCHERS:
            raise ContractError("workload.launcher", f"must be one of {', '.join(LAUNCHERS)}, got {self.launcher!r}")
        if self.command_from not in ("init", "user"):
            raise ContractError("workload.command_from", f"must be init or user, got {self.command_from!r}")
        cwd = Path(self.cwd)
        if cwd.is_absolute() or ".." in cwd.parts:
            raise ContractError("workload.cwd", f"must be a path inside the repo, got {self.cwd!r}")
        for key, value in self.env.items():
            if not isinstance(value, str) or not key or "=" in key:
                raise ContractError(f"workload.env.{key}", "must map a variable name to a string")
        for key, override in self.overrides.items():
            if not isinstance(override, (bool, int, float, str)):
                raise ContractError(f"workload.overrides.{key}", f"must be a bool, int, float or str, got {override!r}")
        if self.knob_style not in ("argparse", "globals", "dataclass", "nested", "click", "typer", "fire"):
            raise ContractError("workload.knob_style", f"unknown style {self.knob_style!r}")
        for name in ("measured_steps", "planned_steps"):
            if getattr(self, name) <= 0:
                raise ContractError(f"workload.{name}", "must be positive")
        if self.attention not in ATTENTION_KINDS:
            raise ContractError("workload.attention", f"must be one of {', '.join(map(repr, ATTENTION_KINDS))}, "
                                                      f"got {self.attention!r}")
        for name in ("tokens_per_step", "seq_len", "global_batch", "hidden", "heads", "layers", "params"):
            if getattr(self, name) < 0:
                raise ContractError(f"workload.{name}", "must not be negative (0: unknown until doctor measures it)")
        if self.warmup_steps < 0:
            raise ContractError("workload.warmup_steps", "must not be negative")
        if self.epochs < 0:
            raise ContractError("workload.epochs", "must not be negative (0: the job's length is counted in steps)")

    @property
    def total_steps(self) -> int:
        return self.warmup_steps + self.measured_steps


@dataclass(kw_only=True, slots=True)
class LossInvariant:
    compare_steps: int
    """K: the first K steps' losses are compared with the reference."""
    tolerance: float
    """Largest allowed |loss - reference| for changes that keep numerics."""
    numerics_tolerance: float
    """The looser, declared tolerance for changes that alter numerics by design (bf16, tf32)."""
    reference: list[float] = field(default_factory=list)
    """Baseline losses of the first K steps (written by doctor)."""

    def __post_init__(self) -> None:
        if self.compare_steps <= 0:
            raise ContractError("loss.compare_steps", "must be positive")
        for name in ("tolerance", "numerics_tolerance"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ContractError(f"loss.{name}", "must be a finite number >= 0")
        if self.numerics_tolerance < self.tolerance:
            raise ContractError("loss.numerics_tolerance", "must be at least loss.tolerance")
        if any(not math.isfinite(x) for x in self.reference):
            raise ContractError("loss.reference", "holds a NaN or inf")


@dataclass(kw_only=True, slots=True)
class MemoryBudget:
    budget_bytes: int
    """Largest peak a rank may reach: its process tree's RSS on CPU, its device's memory on GPU;
    above is OOM. A plain script is one rank; under torchrun every worker is held to it."""
    device: str = "cpu"
    """cpu | cuda."""

    def __post_init__(self) -> None:
        if self.budget_bytes <= 0:
            raise ContractError("memory.budget_bytes", "must be positive")
        if self.device not in ("cpu", "cuda"):
            raise ContractError("memory.device", f"must be cpu or cuda, got {self.device!r}")


@dataclass(kw_only=True, slots=True)
class Scope:
    editable: list[str]
    """Repo-relative paths patches may change."""
    functions: list[str] = field(default_factory=list)
    """Optionally, ``path::qualname`` entries that narrow the editable paths to these functions."""
    locked: dict[str, str] = field(default_factory=dict)
    """Every other Python source: path -> sha256 of its bytes."""

    def __post_init__(self) -> None:
        if not self.editable:
            raise ContractError("scope.editable", "must name at least one file")
        overlap = set(self.editable) & set(self.locked)
        if overlap:
            raise ContractError("scope.locked", f"{sorted(overlap)} are both editable and locked")

    def allows(self, path: str) -> bool:
        return path in self.editable


@dataclass(kw_only=True, slots=True)
class SandboxPolicy:
    """What the job needs from outside the trial's sandbox (``[sandbox]``, optional; see
    docs/sandbox.md). Without the section: no network, no extra paths. The job's own variables are
    ``workload.env``."""

    network: bool = False
    """The job downloads or talks to a service while it trains."""
    read_only: list[str] = field(default_factory=list)
    """Absolute paths outside the repository the job reads (a dataset), mounted read-only."""

    def __post_init__(self) -> None:
        for path in self.read_only:
            if not isinstance(path, str) or not Path(path).is_absolute():
                raise ContractError("sandbox.read_only", f"{path!r} must be an absolute path")


@dataclass(kw_only=True, slots=True)
class VerifyPolicy:
    """How much re-verification a promotion costs (``[verify]``, optional; README.md): the run's
    best ``candidates`` rerun against the baseline in interleaved rounds, judged from
    ``least_rounds`` on, at most ``most_rounds``, promoted when the job speed-up's 95% interval
    clears the floor. More rounds narrow the interval; each costs a baseline and a candidate run,
    short and long."""

    candidates: int = 1
    least_rounds: int = 2
    most_rounds: int = 6

    def __post_init__(self) -> None:
        if self.candidates < 1:
            raise ContractError("verify.candidates", "must be at least 1")
        if not 2 <= self.least_rounds <= self.most_rounds:
            raise ContractError("verify.least_rounds",
                                f"needs 2 <= least_rounds <= most_rounds, got {self.least_rounds} and {self.most_rounds}")


# The owner's tables: edited by hand, so outside the hash, and kept when init writes a new contract.
POLICY_TABLES: dict[str, type[SandboxPolicy | VerifyPolicy]] = {"sandbox": SandboxPolicy, "verify": VerifyPolicy}


@dataclass(kw_only=True, slots=True)
class Contract:
    workload: Workload
    loss: LossInvariant
    memory: MemoryBudget
    scope: Scope
    knobs: list[Knob]
    base_commit: str = ""
    """The git commit init saw (empty when the repo has no git)."""
    schema_version: int = SCHEMA_VERSION
    sandbox: SandboxPolicy | None = None
    """None (no ``[sandbox]`` table): the defaults of SandboxPolicy."""
    verify: VerifyPolicy | None = None
    """None (no ``[verify]`` table): the defaults of VerifyPolicy."""

    @property
    def sandbox_policy(self) -> SandboxPolicy:
        return self.sandbox or SandboxPolicy()

    @property
    def verify_policy(self) -> VerifyPolicy:
        return self.verify or VerifyPolicy()

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        raise KeyError(name)

    def by_role(self, role: str) -> list[Knob]:
        return [k for k in self.knobs if k.role == role]

    @property
    def tunable(self) -> list[Knob]:
        return [k for k in self.knobs if k.tunable]

    def defaults(self) -> dict[str, KnobValue]:
        return {k.name: k.default for k in self.knobs}

    def with_reference(self, losses: list[float], tolerance: float, numerics_tolerance: float) -> Contract:
        loss = replace(
            self.loss,
            reference=[float(x) for x in losses[: self.loss.compare_steps]],
            tolerance=tolerance,
            numerics_tolerance=max(numerics_tolerance, tolerance),
        )
        return replace(self, loss=loss)

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(asdict(self))

    def digest(self) -> str:
        """sha256 over the canonical JSON of every field init wrote (the policy tables aside)."""
        return _digest(self.to_dict())


def _digest(data: dict[str, Any]) -> str:
    written = {k: v for k, v in data.items() if k != "hash" and k not in POLICY_TABLES}
    blob = json.dumps(written, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def contract_path(repo: Path) -> Path:
    return Path(repo) / STATE_DIR / CONTRACT_FILE


STATE_GITIGNORE = """\
# Written by InfraRSI (like .pytest_cache/): what is machine-local (trials, logs, the study,
# the report, the run's state) stays out of git; the contract and the doctor record are meant
# to be committed, so a team runs against the same ones.
*
!.gitignore
!contract.toml
!doctor.json
"""


def ensure_state_dir(repo: Path) -> Path:
    """``.infrarsi/`` with its ``.gitignore`` (written when missing, never overwritten)."""
    state = Path(repo) / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    ignore = state / ".gitignore"
    if not ignore.exists():
        ignore.write_text(STATE_GITIGNORE)
    return state


_HEADER = """\
# InfraRSI task contract (schema {version}). Written by `infrarsi init`, refined by `infrarsi doctor`.
# It fixes what every trial must keep: the workload, the loss invariant, the memory budget and
# the editable scope. Editing it by hand invalidates `hash`; run `infrarsi init` again instead.
"""


def save_contract(contract: Contract, repo: Path) -> Path:
    path = contract_path(repo)
    ensure_state_dir(repo)
    body = {"hash": contract.digest(), **contract.to_dict()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(_HEADER.format(version=SCHEMA_VERSION) + tomli_w.dumps(body))
    tmp.replace(path)
    return path


def _section(data: dict, name: str, path: Path) -> dict:
    value = data.get(name)
    if not isinstance(value, dict):
        raise ContractError(name, "missing section" if value is None else "must be a table", path)
    return value


def _policy(data: dict[str, Any], name: str, cls: type[_Section], path: Path) -> _Section | None:
    """The ``name`` table of POLICY_TABLES, None where the file has none."""
    if name not in data:
        return None
    policy_data = _section(data, name, path)
    _check_types(name, policy_data, path)
    return _build(cls, policy_data, name, path)


def _build(cls: type[_Section], data: dict[str, Any], prefix: str, path: Path) -> _Section:
    names = {f for f in cls.__dataclass_fields__}
    unknown = set(data) - names
    if unknown:
        raise ContractError(f"{prefix}.{sorted(unknown)[0]}", "unknown field", path)
    try:
        return cls(**data)
    except ContractError as err:
        raise ContractError(err.field, str(err).split(": ", 1)[-1], path) from None
    except TypeError as err:
        missing = [f for f, spec in cls.__dataclass_fields__.items() if f not in data]
        field_name = f"{prefix}.{missing[0]}" if missing else prefix
        raise ContractError(field_name, f"missing or wrong ({err})", path) from None


_VALUE = (bool, int, float, str)
_TYPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "workload": {"entry": str, "command": list, "cwd": str, "launcher": str, "knob_style": str, "args": dict,
                 "module": str, "command_from": str, "env": dict, "overrides": dict, "notes": list,
                 "tokens_per_step": int, "seq_len": int, "global_batch": int, "seed": int,
                 "global_batch_knob": str, "seq_len_knob": str, "samples_per_step": int, "hidden": int, "heads": int,
                 "layers": int, "params": int, "attention": str,
                 "warmup_steps": int, "measured_steps": int, "planned_steps": int},
    "loss": {"compare_steps": int, "tolerance": (int, float), "numerics_tolerance": (int, float), "reference": list},
    "memory": {"budget_bytes": int, "device": str},
    "scope": {"editable": list, "functions": list, "locked": dict},
    "knob": {"name": str, "role": str, "type": str, "default": _VALUE, "flag": str, "flag_style": str,
             "domain": list, "tunable": bool, "help": str, "source": str, "patch": str, "over_ranks": bool},
    "sandbox": {"network": bool, "read_only": list},
    "verify": {"candidates": int, "least_rounds": int, "most_rounds": int},
}
# What the items of a list field (or the values of a table field) must be.
_ITEMS: dict[str, type | tuple[type, ...]] = {
    "workload.command": str, "workload.args": _VALUE, "loss.reference": (int, float), "scope.editable": str,
    "scope.functions": str, "scope.locked": str, "knob.domain": _VALUE, "workload.env": str, "sandbox.read_only": str,
}
_KNOB_TYPES = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,)}


def _is(value: Any, expected: type | tuple[type, ...]) -> bool:
    """isinstance, except that a bool is not an int or a float here (TOML keeps them apart)."""
    expected = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool):
        return bool in expected
    return isinstance(value, expected)


def _check_types(section: str, data: dict, path: Path, label: str | None = None) -> None:
    label = label or section
    for name, expected in _TYPES[section].items():
        if name not in data:
            continue
        value = data[name]
        if not _is(value, expected):
            raise ContractError(f"{label}.{name}", f"has type {type(value).__name__}", path)
        items = _ITEMS.get(f"{section}.{name}")
        if items is not None:
            for key, item in (value.items() if isinstance(value, dict) else enumerate(value)):
                if not _is(item, items) or isinstance(key, str) and not key:
                    raise ContractError(f"{label}.{name}", f"item {key!r} = {item!r} has type {type(item).__name__}", path)


def _check_knob_values(index: int, data: dict, path: Path) -> None:
    allowed = _KNOB_TYPES.get(data.get("type", ""))
    if allowed is None:
        return  # Knob itself names the unknown type
    for name, values in (("default", [data.get("default")]), ("domain", data.get("domain", []))):
        for value in values:
            if value is not None and not _is(value, allowed):
                raise ContractError(f"knobs[{index}].{name}", f"{value!r} is not a {data['type']}", path)


def _inside(repo: Path, rel: str) -> bool:
    """Whether repo-relative ``rel`` names a place inside the repository (also once resolved)."""
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or ".." in pure.parts or "\\" in rel:
        return False
    root = Path(repo).resolve()
    return root == (root / rel).resolve() or root in (root / rel).resolve().parents


def _check_paths(contract: Contract, repo: Path, path: Path) -> None:
    scope, workload = contract.scope, contract.workload
    named = [("workload.entry", workload.entry), ("workload.cwd", workload.cwd)]
    named += [("scope.editable", p) for p in scope.editable]
    named += [("scope.functions", f.split("::", 1)[0]) for f in scope.functions]
    named += [("scope.locked", p) for p in scope.locked]
    for field_name, rel in named:
        if not _inside(repo, rel):
            raise ContractError(field_name, f"{rel!r} is not a path inside the repository", path)


def load_contract(repo: Path, *, check_hash: bool = True) -> Contract:
    """Load and validate ``.infrarsi/contract.toml`` under ``repo``."""
    path = contract_path(repo)
    if not path.exists():
        raise ContractError("(file)", f"no contract at {path}; run `infrarsi init {repo}` first", path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ContractError("(file)", f"not valid TOML: {err}", path) from None
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ContractError("schema_version", f"is {version!r}, this InfraRSI reads {SCHEMA_VERSION}", path)
    sections = {}
    for name in ("workload", "loss", "memory", "scope"):
        sections[name] = _section(data, name, path)
        _check_types(name, sections[name], path)
    knobs_data = data.get("knobs", [])
    if not isinstance(knobs_data, list):
        raise ContractError("knobs", "must be an array of tables", path)
    for i, k in enumerate(knobs_data):
        if not isinstance(k, dict):
            raise ContractError(f"knobs[{i}]", "must be a table", path)
        _check_types("knob", k, path, f"knobs[{i}]")
        _check_knob_values(i, k, path)
    knobs = [_build(Knob, k, f"knobs[{i}]", path) for i, k in enumerate(knobs_data)]
    sandbox = _policy(data, "sandbox", SandboxPolicy, path)
    verify = _policy(data, "verify", VerifyPolicy, path)
    if not isinstance(data.get("base_commit", ""), str):
        raise ContractError("base_commit", f"has type {type(data['base_commit']).__name__}", path)
    contract = Contract(
        workload=_build(Workload, sections["workload"], "workload", path),
        loss=_build(LossInvariant, sections["loss"], "loss", path),
        memory=_build(MemoryBudget, sections["memory"], "memory", path),
        scope=_build(Scope, sections["scope"], "scope", path),
        knobs=knobs,
        base_commit=data.get("base_commit", ""),
        sandbox=sandbox,
        verify=verify,
    )
    _check_paths(contract, repo, path)
    # The file's own fields, as written: a field a later InfraRSI added (read as its default) is no edit.
    if check_hash and data.get("hash") != _digest(data):
        raise ContractError(
            "hash",
            "does not match the contract's content: a field init wrote was edited by hand (only "
            f"[sandbox] and [verify] are yours to edit). Run `infrarsi init {repo}` to write a fresh one.",
            path,
        )
    return contract


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True, slots=True)
class LockViolation:
    path: str
    reason: str
    """changed | missing"""


def check_locked_files(contract: Contract, repo: Path) -> list[LockViolation]:
    """Locked files whose bytes differ from what init hashed."""
    out = []
    for rel, digest in sorted(contract.scope.locked.items()):
        p = Path(repo) / rel
        if not p.exists():
            out.append(LockViolation(rel, "missing"))
        elif file_sha256(p) != digest:
            out.append(LockViolation(rel, "changed"))
    return out


def require_intact(repo: Path) -> Contract:
    """Load the contract and refuse when a locked file changed; every later stage starts here."""
    contract = load_contract(repo)
    ensure_state_dir(repo)  # a repo initialised before .infrarsi/ ignored its own machine-local files
    violations = check_locked_files(contract, repo)
    if violations:
        v = violations[0]
        raise ContractError(
            "scope.locked",
            f"locked file {v.path} is {v.reason} since init. Restore it (git checkout -- {v.path}) "
            f"or re-run `infrarsi init {repo}` to accept the change.",
            contract_path(repo),
        )
    return contract
