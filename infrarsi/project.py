"""A prepared repository as the stages after doctor read it, once: its contract, doctor's profile,
the model configuration and the editable sources, passed down instead of each part re-reading
the repository (docs/INTERFACES.md)."""

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
class Project:
    repo: Path
    contract: Contract
    doctor: DoctorReport
    llm: LLMConfig
    sources: Mapping[str, str]
    """``editable_sources`` as they were when the project was opened."""

    @classmethod
    def open(cls, repo: Path, llm: LLMConfig | None = None) -> Project:
        """``repo`` after init and doctor. Raises ``ContractError`` for a missing or changed contract,
        ``DoctorError`` for a missing or unreadable profile; ``llm``: the configuration the caller
        already read (None: read it here)."""
        repo = Path(repo).resolve()
        contract = require_intact(repo)
        doctor = load_doctor(repo)
        if doctor is None:
            raise DoctorError(f"no baseline profile in {state_dir(repo)}; run `infrarsi doctor {repo}` first")
        return cls(repo=repo, contract=contract, doctor=doctor, llm=llm if llm is not None else load_llm_config(repo),
                   sources=editable_sources(repo, contract))
