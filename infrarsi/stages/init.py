"""init: read a training repo without running it and write its task contract.

Finds the entry point and its knobs (libcst; nothing of the user's is imported or run), gives each
knob a role from the built-in catalog and a search domain, derives the workload (global batch,
sequence length, tokens per step, seed, step counts), locks the editable scope and hashes every
other Python source, and writes ``.infrarsi/contract.toml``.

The editable scope defaults to the files that define the model (an ``nn.Module`` subclass) or run
the training loop (call ``.backward()``), among the entry point and the repo modules it imports.
``scope`` entries change it: ``path`` or ``path::function`` replace the default list,
``+path`` adds to it and ``-path`` removes from it. A Python file trials write tunable knobs into
(a dataclass config's defaults, a setting written in code) is editable whatever the scope says.

The probe: when no file of the job calls ``probe.step``, the result carries the codemod's diff.
init writes it into the user's file only when called with ``insert_probe=True`` (CLI
``--insert-probe``); otherwise the user's tree is never touched.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import libcst as cst
import psutil

from infrarsi import batch
from infrarsi.byte_units import GIB, MIB
from infrarsi.codemods.insert_probe import probe_diff
from infrarsi.commandline import Command, CommandError, parse_command, script_settings
from infrarsi.contract import (
    POLICY_TABLES,
    Contract,
    ContractError,
    Knob,
    KnobValue,
    LossInvariant,
    MemoryBudget,
    Scope,
    Workload,
    contract_path,
    file_sha256,
    load_contract,
    save_contract,
)
from infrarsi.knobs.attention import attention_kind
from infrarsi.knobs.catalog import counts_epochs, domain, shape_of
from infrarsi.knobs.command_values import apply_command
from infrarsi.knobs.dataflow import build_graph, knob_sources
from infrarsi.knobs.device import DeviceFit, fit_device, is_device_knob, module_device_knob, require_no_cuda
from infrarsi.knobs.discover import Discovery, discover
from infrarsi.knobs.entry import EntryPoint, find_entry
from infrarsi.knobs.frameworks import framework_settings, with_settings
from infrarsi.knobs.literals import literal_settings
from infrarsi.knobs.llm_roles import Claim, classify_unknown, knob_uses, save_claims
from infrarsi.knobs.loop import find_loop
from infrarsi.knobs.pair import PairFlow, pair_flow
from infrarsi.knobs.raw import RawKnob
from infrarsi.knobs.roles import Role, assign_roles
from infrarsi.knobs.source import DiscoveryError, ParsedFile, dotted, parse, python_files, read_text, walk
from infrarsi.launcher.settings import launcher_knobs
from infrarsi.llm import LLMConfig, load_llm_config
from infrarsi.patches import patch_knobs
from infrarsi.project import editable_sources

WARMUP_STEPS = 3
MEASURED_STEPS = 10
"""Sized for trials of seconds: enough steps for a stable median, few enough to try many settings."""
LOSS_TOLERANCE = 1e-4
NUMERICS_TOLERANCE = 5e-2
"""Starting tolerances; doctor refines both from the baseline's measured spread."""
BUDGET_FRACTION = 0.8
"""Default memory budget: this share of the available RAM (CPU) or of the card (CUDA)."""
_README_BUDGET = re.compile(r"<!--\s*infrarsi:\s*budget_mib\s*=\s*(\d+)\s*-->")


class InitStatus(StrEnum):
    OK = "ok"
    ERROR = "error"


@dataclass(slots=True)
class InitResult:
    status: InitStatus
    message: str
    contract_path: str = ""
    contract: Contract | None = None
    entry: str = ""
    knobs_by_role: dict[str, list[str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    """Knobs the catalog does not know: kept at their defaults."""
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Declarations that cannot be knobs: name, source (file:line), reason."""
    editable: list[str] = field(default_factory=list)
    locked: list[str] = field(default_factory=list)
    probe_missing: bool = False
    probe_diff: str | None = None
    """The codemod's diff when the probe is missing and the loop was found (None otherwise)."""
    probe_inserted: bool = False
    warnings: list[str] = field(default_factory=list)
    entry_why: str = ""
    """Why the entry point is this file (the command names it, or what made it the best candidate)."""
    loop_kind: str = ""
    """Where the training loop is: module_loop | function_from_module | main_guard | trainer | none."""
    loop_why: str = ""
    """What was found and how running the script reaches it."""
    notes: list[str] = field(default_factory=list)
    """What init changed about the baseline (a device this machine lacks), as in the contract."""
    claims: list[dict[str, str]] = field(default_factory=list)
    """With an Anthropic key: the model's roles for unknown knobs (name, role, evidence, status, why);
    they stay locked in the contract until a measurement confirms them."""
    pair: PairFlow | None = None
    """The script's micro-batch and accumulation, tuned as one dimension that holds the global batch,
    and the data flow that shows it (``infrarsi.knobs.pair``); None when it has no such pair."""

    @property
    def ok(self) -> bool:
        return self.status is InitStatus.OK

    def to_dict(self) -> dict:
        data = asdict(self)
        data["contract"] = self.contract.to_dict() if self.contract else None
        return data


def _owner_tables(repo: Path, warnings: list[str]) -> dict[str, Any]:
    """The policy tables the owner wrote into the contract this one replaces, kept as they were."""
    if not contract_path(repo).exists():
        return {}
    try:
        previous = load_contract(repo, check_hash=False)
    except ContractError as error:
        warnings.append(f"the previous contract's [sandbox] and [verify] are not kept: {error}")
        return {}
    return {name: table for name in POLICY_TABLES if (table := getattr(previous, name)) is not None}


def init(
    repo: Path,
    *,
    command: list[str] | None = None,
    cwd: Path | str | None = None,
    scope: list[str] | None = None,
    budget_bytes: int | None = None,
    entry: str | None = None,
    launcher: str | None = None,
    insert_probe: bool = False,
    warmup_steps: int = WARMUP_STEPS,
    measured_steps: int = MEASURED_STEPS,
    planned_steps: int | None = None,
    llm: LLMConfig | None = None,
) -> InitResult:
    """Discover ``repo``'s job and write its contract; every failure comes back as status ``error``.

    ``command``: the owner's launch command (what followed ``--``), run from ``cwd`` (a directory
    inside ``repo``; default the repo root). Without it the entry point and launcher are detected.
    ``llm``: the model configuration the caller already read (``optimize``); None: read it here."""
    repo = Path(repo)
    if not repo.is_dir():
        return InitResult(InitStatus.ERROR, f"{repo} is not a directory")
    try:
        user = _user_command(repo, command, cwd) if command is not None else None
        if user is not None and (entry is not None or launcher is not None):
            raise DiscoveryError("--entry and --launcher cannot be combined with a command after --: "
                                 "the command names the script and its launcher")
        return _init(repo, user, scope, budget_bytes, entry, launcher, insert_probe, warmup_steps, measured_steps,
                     planned_steps, llm if llm is not None else load_llm_config(repo))
    except (DiscoveryError, ContractError, CommandError) as err:
        return InitResult(InitStatus.ERROR, str(err))


@dataclass(slots=True)
class _UserCommand:
    command: Command
    cwd: str
    """Repo-relative directory the command runs in."""
    entry: str
    """Repo-relative file of the script (or ``-m`` module)."""


def _user_command(repo: Path, tokens: list[str], cwd: Path | str | None) -> _UserCommand:
    """The command after ``--``, checked: it must start (its script or module is a file in the repo)."""
    command = parse_command(list(tokens))
    root = repo.resolve()
    where = (repo / cwd if cwd is not None and not Path(cwd).is_absolute() else Path(cwd or repo)).resolve()
    try:
        cwd_rel = where.relative_to(root).as_posix()
    except ValueError:
        raise CommandError(f"the command's directory {where} is outside the repository {root}") from None
    if not where.is_dir():
        raise CommandError(f"the command's directory {where} does not exist")
    shown = " ".join(command.argv)
    target = command.target_text
    if command.module:
        parts = target.split(".")
        options = [where.joinpath(*parts).with_suffix(".py"), where.joinpath(*parts, "__main__.py")]
        if root != where:
            options += [root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__main__.py")]
        found = next((p for p in options if p.is_file()), None)
        if found is None:
            raise CommandError(f"`{shown}` does not start: no module {target} in {where} "
                               "(InfraRSI reads the training code from the repository)")
    else:
        found = (where / target).resolve()
        if not found.is_file():
            raise CommandError(f"`{shown}` does not start: {target} does not exist in {where}")
    try:
        entry = found.resolve().relative_to(root).as_posix()
    except ValueError:
        raise CommandError(f"`{shown}`: {target} is outside the repository {root}") from None
    if command.launcher == "accelerate" and importlib.util.find_spec("accelerate") is None:
        raise CommandError(f"`{shown}` does not start: accelerate is not installed in this Python ({sys.executable})")
    _require_python(repo, entry)
    return _UserCommand(command=command, cwd=cwd_rel, entry=entry)


def _require_python(repo: Path, rel: str) -> None:
    """The script must be Python source, said in one line when it is not."""
    try:
        text = (repo / rel).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DiscoveryError(f"{rel} is not a Python file (it is not UTF-8 text)") from None
    if not rel.endswith(".py"):
        try:
            ast.parse(text)
        except SyntaxError:
            raise DiscoveryError(f"{rel} is not a Python file (it does not parse as Python)") from None


def _init(repo: Path, user: _UserCommand | None, scope: list[str] | None, budget_bytes: int | None, entry: str | None,
          launcher: str | None, insert_probe: bool, warmup: int, measured: int, planned: int | None,
          llm: LLMConfig) -> InitResult:
    if user is not None:
        ep = find_entry(repo, user.entry, why=f"the command runs it (`{' '.join(user.command.argv)}`)")
        ep = EntryPoint(ep.path, ep.wrapper, user.command.launcher, "the command's launcher", ep.trains, ep.why)
    else:
        ep = find_entry(repo, entry)
    if launcher is not None:
        if launcher not in ("python", "torchrun"):
            raise DiscoveryError(f"launcher must be python or torchrun, got {launcher!r}")
        ep = EntryPoint(ep.path, ep.wrapper, launcher, "chosen with --launcher", ep.trains, ep.why)
    args, cwd = (user.command.script_args, user.cwd) if user is not None else ([], ".")
    found = discover(repo, ep, args, cwd)  # the command chooses a nested config's files
    readers = [ParsedFile(ep.path, ep.wrapper), *(ParsedFile(rel, parse(repo, rel)) for rel in found.files[1:])]
    settings = framework_settings(readers)
    found.knobs = with_settings(found.knobs, settings)
    in_code = literal_settings(readers, has_cuda=_cuda_count() > 0)
    found.knobs = [*found.knobs, *(s.knob for s in in_code)]
    warnings = list(found.warnings)
    loop = find_loop((ep.path, ep.wrapper), [(rel, parse(repo, rel)) for rel in found.files[1:]])
    if not loop.found:
        warnings.append(loop.why)

    set_by: dict[str, str] = {}
    if user is not None:
        values = apply_command(repo, user.cwd, found, user.command)
        found = Discovery(style=found.style, knobs=values.knobs, skipped=values.skipped, files=found.files,
                          warnings=found.warnings, subcommand=found.subcommand)
        set_by = values.set_by
    known = {**{s.name: Role(s.rule, "framework schema") for s in settings},
             **{s.knob.name: Role(s.rule, f"written in code at {s.knob.source}") for s in in_code}}
    knobs, workload_facts = _knobs(found, ep, warnings, user, readers, known, repo)
    knobs, fit = _fit_device(repo, ep, knobs, set_by)
    warnings.extend(fit.notes)
    workload = _workload(repo, ep, found, knobs, workload_facts, warmup, measured, planned, warnings, user, fit)

    editable, functions = _scope(repo, found, ep, scope)
    editable += [rel for rel in _knob_files(knobs) if rel not in editable]
    diff, inserted, missing = _probe(repo, found, ep, insert_probe, warnings)
    locked = {rel: file_sha256(repo / rel) for rel in python_files(repo) if rel not in editable}

    device = _device(knobs)
    contract = Contract(
        workload=workload,
        loss=LossInvariant(
            compare_steps=workload.total_steps,
            tolerance=LOSS_TOLERANCE,
            numerics_tolerance=NUMERICS_TOLERANCE,
        ),
        memory=MemoryBudget(budget_bytes=budget_bytes or _default_budget(repo, device, warnings), device=device),
        scope=Scope(editable=editable, functions=functions, locked=locked),
        knobs=knobs,
        base_commit=_base_commit(repo),
        **_owner_tables(repo, warnings),
    )
    added = patch_knobs(editable_sources(repo, contract), contract)
    if added:
        knobs = [*knobs, *added]
        contract = replace(contract, knobs=knobs)
    path = save_contract(contract, repo)
    claims = _claims(llm, found, knobs, readers, warnings)
    save_claims(repo, claims)
    by_role: dict[str, list[str]] = {}
    for k in knobs:
        by_role.setdefault(k.role, []).append(k.name)
    tunable = len(contract.tunable)
    return InitResult(
        status=InitStatus.OK,
        message=(
            f"{ep.path} ({found.style}, {workload.launcher}): {len(knobs)} knobs, {tunable} tunable; "
            f"contract written to {path}"
        ),
        contract_path=str(path),
        contract=contract,
        entry=ep.path,
        knobs_by_role=by_role,
        unknown=by_role.get("unknown", []),
        skipped=[{"name": k.name, "source": k.source, "reason": k.note} for k in found.skipped],
        editable=editable,
        locked=sorted(locked),
        probe_missing=missing,
        probe_diff=diff,
        probe_inserted=inserted,
        warnings=warnings,
        entry_why=ep.why,
        loop_kind=loop.kind,
        loop_why=loop.why,
        notes=list(fit.notes),
        claims=[asdict(c) for c in claims],
        pair=workload_facts.pair,
    )


def _claims(config: LLMConfig, found: Discovery, knobs: list[Knob], readers: list[ParsedFile],
            warnings: list[str]) -> list[Claim]:
    """The configured model's claims about the knobs the rules leave unknown (none without a key).
    They change no role here: doctor believes a claim only once a trial agrees (stages/claims.py)."""
    unknown = {k.name for k in knobs if k.role == "unknown"}
    raw = [k for k in found.knobs if k.name in unknown]
    if not raw or not config.configured:
        return []
    result = classify_unknown(config, raw, knob_uses(readers, [k.name for k in raw]))
    if result.status != "ok":
        warnings.append(f"model classification of unknown knobs: {result.message}")
    return result.claims


def _machine() -> str:
    import platform

    return f"{platform.node() or 'this host'}, {os.cpu_count() or 1} CPUs"


def _fit_device(repo: Path, ep: EntryPoint, knobs: list[Knob], set_by: dict[str, str]) -> tuple[list[Knob], DeviceFit]:
    """Knobs with a device this machine has as their default; the overrides and notes that say so."""
    has_cuda = _cuda_count() > 0
    if not has_cuda and not any(k.name == "device" for k in knobs):
        extra = module_device_knob(ep.path, ep.wrapper)
        if extra is not None and not any(k.name == extra.name for k in knobs):
            knobs = [*knobs, extra]
    fit = fit_device(knobs, set_by, has_cuda, _machine())
    if not has_cuda and not fit.overrides and not any(is_device_knob(k) for k in knobs):
        require_no_cuda(ep.path, ep.wrapper, _machine())
    knobs = [replace(k, default=fit.overrides[k.name]) if k.name in fit.overrides else k for k in knobs]
    return knobs, fit


# ---------------------------------------------------------------- knobs and workload


@dataclass(slots=True)
class _Facts:
    """What the workload is, read off the knob defaults."""

    global_batch: int = 0
    global_batch_knob: str = ""
    tokens: int = 0
    seq_len: int = 0
    seq_len_knob: str = ""
    hidden: int = 0
    heads: int = 0
    layers: int = 0
    seed: int | None = None
    steps: RawKnob | None = None
    epochs: RawKnob | None = None
    pair: PairFlow | None = None
    """The micro-batch and accumulation coupled as one dimension, with the data flow that shows it."""


def _knobs(found: Discovery, ep: EntryPoint, warnings: list[str], user: _UserCommand | None = None,
           readers: Sequence[ParsedFile] = (), known: dict[str, Role] | None = None,
           repo: Path = Path(".")) -> tuple[list[Knob], _Facts]:
    graph = build_graph(list(readers))
    assigned = assign_roles(list(readers), found.knobs, found.style, graph=graph, known=known)
    rules = {name: role.rule for name, role in assigned.items()}
    roles = {name: rule.role for name, rule in rules.items()}
    facts = _Facts()
    for k in found.knobs:
        aspect = rules[k.name].aspect
        if aspect == "global_batch" and isinstance(k.default, int) and not facts.global_batch_knob:
            facts.global_batch, facts.global_batch_knob = k.default, k.name
        elif aspect == "global_tokens" and isinstance(k.default, int):
            facts.tokens = k.default
            facts.global_batch_knob = k.name
        elif aspect == "seq_len" and isinstance(k.default, int) and not facts.seq_len_knob:
            facts.seq_len, facts.seq_len_knob = k.default, k.name
        elif aspect == "model" and type(k.default) is int and k.default > 0 and (what := shape_of(k.name)) \
                and not getattr(facts, what):
            setattr(facts, what, k.default)
        elif aspect == "seed" and isinstance(k.default, int) and facts.seed is None:
            facts.seed = k.default
        elif roles[k.name] == "steps" and isinstance(k.default, int) and facts.steps is None:
            facts.steps = k
        elif roles[k.name] in ("unknown", "workload") and counts_epochs(k) and facts.epochs is None:
            facts.epochs = k
    # The micro-batch and accumulation knobs with an int default, as (name, default).
    micro = [(k.name, k.default) for k in found.knobs if roles[k.name] == "micro_batch" and isinstance(k.default, int)]
    accum = [(k.name, k.default) for k in found.knobs if roles[k.name] == "grad_accum" and isinstance(k.default, int)]
    if not facts.global_batch_knob:
        if micro and accum:
            # nanoGPT: the global batch is micro-batch x accumulation (x the processes, unless the script
            # divides its count by them); the search keeps the product.
            ranks = _command_nproc(user) if ep.launcher == "torchrun" else 1
            over = bool(assigned[accum[0][0]].over_ranks)
            facts.global_batch = batch.global_batch(micro[0][1], accum[0][1], 1 if over else ranks)
        elif micro:
            # A micro-batch with nothing to accumulate over is the global batch: it defines the workload.
            roles[micro[0][0]] = "workload"
            facts.global_batch, facts.global_batch_knob = micro[0][1], micro[0][0]
    if facts.tokens and facts.seq_len:
        facts.global_batch = facts.tokens // facts.seq_len
    elif facts.global_batch and facts.seq_len:
        facts.tokens = facts.global_batch * facts.seq_len
    if not facts.tokens:
        what = "global batch" if not facts.global_batch else "sequence length"
        warnings.append(
            f"tokens per step cannot be derived from the knob defaults (no {what} knob found): "
            "it is 0 (unknown) in the contract and doctor must measure it with the probe"
        )

    cpu_count = os.cpu_count() or 1
    # torch's default thread count: the physical cores for one process; under torchrun it
    # depends on the process count (OMP_NUM_THREADS=1 for several), so no count is implied.
    auto = (psutil.cpu_count(logical=False) or cpu_count) if ep.launcher == "python" else None
    gpus = _cuda_count()
    knobs = []
    for k in found.knobs:
        assert k.default is not None  # a discovered knob has its default (domain holds it to that too)
        role = roles[k.name]
        values, why = domain(role, k, global_batch=facts.global_batch or None, cpu_count=cpu_count,
                             auto_threads=auto, constants=assigned[k.name].constants, gpus=gpus)
        tunable = len(values) >= 2
        if role not in ("workload", "unknown", "steps") and not tunable:
            warnings.append(f"knob {k.name} ({role}) stays fixed: {why or 'a single value'}")
        knobs.append(
            Knob(
                name=k.name, role=role, type=k.type, default=k.default, flag=k.flag, flag_style=k.flag_style,
                domain=values if tunable else [], tunable=tunable, help=k.help, source=k.source,
                over_ranks=True if role == "grad_accum" and assigned[k.name].over_ranks else None,
            )
        )
    if ep.launcher == "torchrun":
        knobs.append(_nproc_knob(facts.global_batch, _command_nproc(user)))
    entry = readers[0].rel if readers else ep.path
    sources = {k.name: knob_sources(k.name, found.style, entry, k.receiver) for k in found.knobs}
    accum_role = next((assigned[k.name] for k in found.knobs if roles[k.name] == "grad_accum"), None)
    facts.pair = pair_flow(repo, graph, knobs, sources, facts.global_batch,
                           accum_role.over_ranks if accum_role else "",
                           _command_nproc(user) if ep.launcher == "torchrun" else 1)
    knobs += launcher_knobs(knobs, has_cuda=gpus > 0, cpu_count=cpu_count, auto_threads=auto,
                            launcher=ep.launcher)
    return knobs, facts


def _command_nproc(user: _UserCommand | None) -> int:
    """The process count the owner's torchrun command gives (1 when it gives none or a word)."""
    if user is None:
        return 1
    for arg in script_settings(user.command.head[1:]):
        if arg.flag.replace("-", "_") == "__nproc_per_node" and arg.value and arg.value.isdigit():
            return int(arg.value)
    return 1


def _nproc_knob(global_batch: int, default: int = 1) -> Knob:
    """torchrun's process count: 1 to the devices this machine has, dividing the global batch."""
    devices = _cuda_count() or os.cpu_count() or 1
    values = [n for n in range(1, devices + 1) if global_batch and global_batch % n == 0] or [1]
    if default not in values:
        values = sorted({*values, default})
    return Knob(
        name="nproc_per_node", role="nproc_per_node", type="int", default=default, flag="--nproc_per_node",
        domain=[*values] if len(values) > 1 else [], tunable=len(values) > 1,
        help="torchrun processes per node (a launcher option: it goes before the script)", source="launcher",
    )


def _workload(repo: Path, ep: EntryPoint, found: Discovery, knobs: list[Knob], facts: _Facts, warmup: int,
              measured: int, planned: int | None, warnings: list[str], user: _UserCommand | None = None,
              fit: DeviceFit | None = None) -> Workload:
    if user is not None:
        command = list(user.command.argv)
    elif ep.launcher == "torchrun":
        command = ["torchrun", "--nproc_per_node=1", ep.path]
    else:
        command = ["python", ep.path]
    if user is None and found.subcommand:
        command.append(found.subcommand)  # a click group's or fire dict's command, named before its flags
    args: dict[str, KnobValue] = {}
    steps = facts.steps
    if steps is not None and steps.flag:
        args[steps.flag.lstrip("-")] = warmup + measured
    if steps is None:
        warnings.append(
            "no step-count knob (max_iters, steps, …): the launcher stops each trial after "
            f"{warmup} warm-up + {measured} measured steps"
        )
    epochs = 0
    if planned is not None:
        planned_from = "--planned-steps"
    elif steps is not None and isinstance(steps.default, int):  # always an int: _knobs took it for one
        planned, planned_from = steps.default, f"{steps.flag or steps.name} = {steps.default}"
    elif facts.epochs is not None and isinstance(facts.epochs.default, (int, float)) and int(facts.epochs.default) > 0:
        # Counted in epochs (a number: counts_epochs chose it): doctor measures the steps an epoch and sets the
        # real length.
        epochs = int(facts.epochs.default)
        planned, planned_from = warmup + measured, f"{epochs} epochs ({facts.epochs.flag or facts.epochs.name})"
    else:
        planned, planned_from = warmup + measured, "no step or epoch count: one trial's length"
    if facts.seed is None:
        warnings.append("no seed knob: the loss invariant needs the script to seed itself the same way every run")
    return Workload(
        entry=ep.path,
        command=command,
        cwd=user.cwd if user is not None else ".",
        launcher=ep.launcher,
        module=user.command.target_text if user is not None and user.command.module else "",
        command_from="user" if user is not None else "init",
        env=dict(user.command.env) if user is not None else {},
        overrides=dict(fit.overrides) if fit is not None else {},
        notes=list(fit.notes) if fit is not None else [],
        knob_style=found.style,
        args=args,
        tokens_per_step=facts.tokens,
        seq_len=facts.seq_len,
        global_batch=facts.global_batch,
        global_batch_knob=facts.global_batch_knob,
        seq_len_knob=facts.seq_len_knob,
        hidden=facts.hidden,
        heads=facts.heads,
        layers=facts.layers,
        attention=attention_kind(repo),
        seed=facts.seed or 0,
        warmup_steps=warmup,
        measured_steps=measured,
        planned_steps=planned,
        planned_from=planned_from,
        epochs=epochs,
    )


# ---------------------------------------------------------------- scope


def _defines_module(module: cst.Module) -> bool:
    """Whether the file defines a torch module (a class deriving from ``nn.Module`` or ``Module``)."""
    return any(
        isinstance(n, cst.ClassDef) and any(dotted(b.value).endswith("Module") for b in n.bases)
        for n in walk(module)
    )


def default_editable(repo: Path, files: list[str]) -> list[str]:
    """Model and training-loop files among the job's own files."""
    out = []
    for rel in files:
        module = parse(repo, rel).module
        if _defines_module(module) or ".backward(" in module.code:
            out.append(rel)
    return out


def _has_function(module: cst.Module, qualname: str) -> bool:
    def find(body: Sequence[cst.CSTNode], parts: list[str]) -> bool:
        for stmt in body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == parts[0]:
                if len(parts) == 1:
                    return True
                inner = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ()
                return find(inner, parts[1:])
        return False

    return find(module.body, qualname.split("."))


def _knob_files(knobs: list[Knob]) -> list[str]:
    """The Python files trials write tunable knobs into (a dataclass config's defaults, a setting
    written in code): editable, or every trial that moves one would change a locked file."""
    paths = [k.source_path for k in knobs if k.tunable and not k.flag and k.source_line]
    return list(dict.fromkeys(p for p in paths if p.endswith(".py")))


def _scope(repo: Path, found: Discovery, ep: EntryPoint, spec: list[str] | None) -> tuple[list[str], list[str]]:
    editable = default_editable(repo, found.files) or [ep.path]
    functions: list[str] = []
    if spec:
        replace_with: list[str] = []
        for item in spec:
            sign, rest = (item[0], item[1:]) if item[:1] in "+-" else ("", item)
            path, _, func = rest.partition("::")
            rel = Path(path).as_posix()
            if not (repo / rel).is_file() or not rel.endswith(".py"):
                raise DiscoveryError(f"scope entry {item!r}: no Python file {rel} under {repo}")
            if func and not _has_function(parse(repo, rel).module, func):
                raise DiscoveryError(f"scope entry {item!r}: {rel} defines no function or class {func}")
            if func:
                functions.append(f"{rel}::{func}")
            if sign == "-":
                editable = [e for e in editable if e != rel]
            elif sign == "+":
                editable = [*editable, rel] if rel not in editable else editable
            else:
                replace_with.append(rel)
        if replace_with:
            editable = list(dict.fromkeys(replace_with))
        if not editable:
            raise DiscoveryError("the scope leaves no editable file; name at least one")
    return editable, functions


# ---------------------------------------------------------------- probe, memory, git


def _probe(repo: Path, found: Discovery, ep: EntryPoint, write: bool, warnings: list[str]
           ) -> tuple[str | None, bool, bool]:
    """(diff or None, inserted, missing): the probe codemod on the file with the training loop."""
    texts = {rel: read_text(repo, rel) for rel in found.files}
    if any("probe.step(" in t for t in texts.values()):
        return None, False, False
    loop_files = [rel for rel, t in texts.items() if ".backward(" in t]
    if not loop_files:
        warnings.append("no probe (optional: the launcher measures steps from outside the job); no file of the "
                        "job calls .backward(), so phases need probe.step by hand")
        return None, False, True
    rel = ep.path if ep.path in loop_files else loop_files[0]
    edit, diff = probe_diff(texts[rel], rel, distributed=ep.launcher == "torchrun")
    if edit.status != "inserted":
        warnings.append(f"no probe (optional: the launcher measures steps from outside the job); it cannot be "
                        f"inserted into {rel}: {edit.reason}")
        return None, False, True
    if write:
        (repo / rel).write_text(edit.code)
        return diff, True, False
    warnings.append(f"no probe in {rel} (optional: the launcher measures steps from outside the job); to name "
                    "phases, review the diff and rerun with --insert-probe")
    return diff, False, True


def _device(knobs: list[Knob]) -> str:
    """cuda when the job's device knob says so (or says auto and a GPU is here), else cpu."""
    for k in knobs:
        if k.name in ("device", "device_type") and isinstance(k.default, str):
            if k.default.startswith("cuda"):
                return "cuda"
            if k.default.startswith("cpu"):
                return "cpu"
    return "cuda" if _cuda_count() else "cpu"


def _cuda_count() -> int:
    import torch  # deferred: ~2 s, and only the device questions need it

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _default_budget(repo: Path, device: str, warnings: list[str]) -> int:
    """The repo README's ``<!-- infrarsi: budget_mib=N -->``, else a share of the device's memory."""
    for readme in sorted(repo.glob("README*")):
        match = _README_BUDGET.search(readme.read_text(errors="replace"))
        if match:
            return int(match.group(1)) * MIB
    if device == "cuda":
        import torch

        total = torch.cuda.get_device_properties(0).total_memory
        warnings.append(f"memory budget: {BUDGET_FRACTION:.0%} of the card ({total / GIB:.1f} GiB); set --budget-gib to change")
        return int(total * BUDGET_FRACTION)
    import psutil

    available = psutil.virtual_memory().available
    warnings.append(
        f"memory budget: {BUDGET_FRACTION:.0%} of the available RAM ({available / GIB:.1f} GiB); set --budget-gib to change"
    )
    return int(available * BUDGET_FRACTION)


def _base_commit(repo: Path) -> str:
    """HEAD of the git repository containing ``repo`` (it may sit inside a larger one); empty without git."""
    import git

    try:
        return git.Repo(repo, search_parent_directories=True).head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return ""
