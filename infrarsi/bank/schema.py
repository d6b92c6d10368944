"""The experience bank's tables (SQLAlchemy 2 ORM). Prefixed ``bank_`` so a team database can
also hold the Optuna study tables.

Columns added after a bank may already exist are nullable and listed in ``ADDED_COLUMNS``:
opening a bank adds the missing ones (``store._migrate``), and a NULL there is read as "not
recorded" (see ``store.UNKNOWN_NOISE_CV`` for how an old finding's noise is then read).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    __tablename__ = "bank_runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    signature: Mapped[str] = mapped_column(String(128), index=True)
    """WorkloadSignature.key, for exact matches."""
    signature_json: Mapped[str] = mapped_column(Text)
    """The full signature, for similarity."""
    hardware_id: Mapped[str] = mapped_column(String(64), index=True)
    hardware: Mapped[str] = mapped_column(Text)
    """Human description of the hardware."""
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    effects: Mapped[list[EffectRow]] = relationship(back_populates="run")
    verdicts: Mapped[list[VerdictRow]] = relationship(back_populates="run")
    best: Mapped[list[BestRow]] = relationship(back_populates="run")


class EffectRow(Base):
    __tablename__ = "bank_effects"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("bank_runs.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(512), index=True)
    """Setting key (``knob=value``) or ``patch:name``."""
    role: Mapped[str] = mapped_column(String(64))
    """The knob's role, or ``patch``."""
    value: Mapped[str] = mapped_column(Text)
    baseline: Mapped[str] = mapped_column(Text)
    """The value the effect is relative to (the knob's default; ``off`` for a patch)."""
    time_log: Mapped[float] = mapped_column(Float)
    time_sd: Mapped[float] = mapped_column(Float)
    mem_log: Mapped[float | None] = mapped_column(Float, nullable=True)
    mem_sd: Mapped[float | None] = mapped_column(Float, nullable=True)
    n: Mapped[int] = mapped_column(Integer)
    """Trials behind the estimate."""
    noise_cv: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Doctor's run-to-run CV of step time in the run that measured it: no finding is surer than
    its trials were. NULL in rows written before it was stored."""
    prior_log: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The time effect the run's own priors (none of the bank's) expected: a finding transfers as
    its surprise over them. NULL where they had no belief, and in rows written before it was stored."""

    run: Mapped[RunRow] = relationship(back_populates="effects")


class VerdictRow(Base):
    __tablename__ = "bank_patch_verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("bank_runs.id", ondelete="CASCADE"), index=True)
    patch: Mapped[str] = mapped_column(String(128), index=True)
    verdict: Mapped[str] = mapped_column(String(32))
    time_log: Mapped[float | None] = mapped_column(Float, nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="")

    run: Mapped[RunRow] = relationship(back_populates="verdicts")


class BestRow(Base):
    __tablename__ = "bank_best_configs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("bank_runs.id", ondelete="CASCADE"), index=True)
    candidate_json: Mapped[str] = mapped_column(Text)
    speedup: Mapped[float] = mapped_column(Float)
    low: Mapped[float] = mapped_column(Float)
    high: Mapped[float] = mapped_column(Float)

    run: Mapped[RunRow] = relationship(back_populates="best")


ADDED_COLUMNS: dict[str, list[tuple[str, str]]] = {"bank_effects": [("noise_cv", "FLOAT"), ("prior_log", "FLOAT")]}
"""Table -> (column, SQL type) added since the first schema; every one nullable."""
