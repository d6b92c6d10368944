"""A prepared repository as the stages after init read it, once: its contract and doctor's profile
(``PreparedRepo``), and for the run also the model configuration and the editable sources
(``Project``), passed down instead of each part re-reading the repository (docs/INTERFACES.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from infrarsi.contract import Contract, require_intact
from infrarsi.llm import LLMConfig, load_llm_config
from infrarsi.records.doctor import DoctorError, DoctorReport, load_doctor
from infrarsi.records.files import state_dir


def editable_python(repo: Path, contract: Contract) -> list[str]:
    """The editable scope's Python files that exist: what patches, priors and the model may read."""
    return [rel for rel in contract.scope.editable if rel.endswith(".py") and (Path(repo) / rel).is_file()]


def editable_sources(repo: Path, contract: Contract) -> dict[str, str]:
    """``editable_python``'s files, path → text."""
    return {rel: (Path(repo) / rel).read_text(errors="replace") for rel in editable_python(repo, contract)}


@dataclass(frozen=True, slots=True)
class PreparedRepo:
    """A repository after init as report, verify and the CLI's ``trial`` read it: each says itself
    what a missing profile means (``Project.open`` refuses one)."""

    contract: Contract
    doctor: DoctorReport | None
    """None before doctor has run."""

    @classmethod
    def open(cls, repo: Path, *, unreadable_doctor_as_missing: bool = False) -> PreparedRepo:
        """``repo`` after init. Raises ``ContractError`` for a missing or changed contract, and
        ``DoctorError`` for an unreadable profile unless ``unreadable_doctor_as_missing`` (verify,
        which runs without one)."""
        contract = require_intact(repo)
        try:
            doctor = load_doctor(repo)
        except DoctorError:
            if not unreadable_doctor_as_missing:
                raise
            doctor = None
        return cls(contract=contract, doctor=doctor)


@dataclass(frozen=True, slots=True)
class Project:
    repo: Path
    contract: Contract
    doctor: DoctorReport
    llm: LLMConfig
    sources: Mapping[str, str]
    """``editable_sources`` as they were when the project was opened: what the patch library and
    the model's proposals read the code through."""

    @classmethod
    def open(cls, repo: Path, llm: LLMConfig | None = None) -> Project:
        """``repo`` after init and doctor. Raises ``ContractError`` for a missing or changed contract,
        ``DoctorError`` for a missing or unreadable profile; ``llm``: the configuration the caller
        already read (None: read it here)."""
        repo = Path(repo).resolve()
        prepared = PreparedRepo.open(repo)
        if prepared.doctor is None:
            raise DoctorError(f"no baseline profile in {state_dir(repo)}; run `infrarsi doctor {repo}` first")
        return cls(repo=repo, contract=prepared.contract, doctor=prepared.doctor,
                   llm=llm if llm is not None else load_llm_config(repo),
                   sources=editable_sources(repo, prepared.contract))
