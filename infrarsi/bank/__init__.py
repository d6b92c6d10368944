"""The experience bank: findings from past runs (effects, patch verdicts, best configurations)
in a database, read back as seeds and priors on the next run, on the same or other hardware."""

from infrarsi.bank.signature import WorkloadSignature
from infrarsi.bank.store import (
    DEFAULT_URL,
    URL_ENV,
    BestConfig,
    EffectFinding,
    ExperienceBank,
    PatchFinding,
    Seed,
    resolve_url,
)

__all__ = [
    "DEFAULT_URL",
    "URL_ENV",
    "BestConfig",
    "EffectFinding",
    "ExperienceBank",
    "PatchFinding",
    "Seed",
    "WorkloadSignature",
    "resolve_url",
]
