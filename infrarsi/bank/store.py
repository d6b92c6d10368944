"""The experience bank: findings from past runs, read back as seeds and priors.

SQLite by default (``~/.infrarsi/bank.db``; ``INFRARSI_BANK_URL`` overrides it), any SQLAlchemy
URL for a team. Several processes may write at once: a run only inserts, in one transaction,
and SQLite runs in WAL mode with a busy timeout so writers queue instead of failing.

A finding is read back no surer than the trials behind it (``finding_sd``): one trial is one noisy
sample, so its band is at least doctor's run-to-run noise for that run, widened for few trials
(Student's t), for each run (a run's baseline and machine state shift all of its findings
together), for age, and then, pooled, for another hardware fingerprint and workload distance. A
lone trial cannot tell an effect from a disturbed run at all: its band reaches back to "no
effect". The run stage combines these with its other priors and drops any that its own trials
contradict (``infrarsi.search.prior_check``).

The user reads and edits the bank with ``infrarsi bank show`` / ``infrarsi bank forget``
(``infrarsi.bank.inspect``).
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import CursorResult, Delete, Engine, create_engine, delete, event, exc, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.orm import QueryableAttribute, Session, selectinload, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from infrarsi.bank.schema import ADDED_COLUMNS, Base, BestRow, EffectRow, RunRow, VerdictRow
from infrarsi.bank.signature import WorkloadSignature
from infrarsi.contract import KnobValue
from infrarsi.priors.types import BASELINE_SD, MAX_ABS_LOG, MAX_SD, Prior, PriorTable
from infrarsi.settings import PATCH_PREFIX, Setting
from infrarsi.trials import Candidate, TrialStatus

DEFAULT_URL = "sqlite:///~/.infrarsi/bank.db"
URL_ENV = "INFRARSI_BANK_URL"
BUSY_TIMEOUT_S = 30.0

MIN_SIMILARITY = 0.3
"""Workloads less alike than this contribute neither seeds nor priors."""
MIN_SD = 0.02
"""Pooled estimates never claim better than ~2%: run-to-run noise on this kind of machine."""
MIN_NOISE_CV = 0.01
"""The quietest run-to-run CV a finding is credited with (doctor's own floor is 1%: noise.py)."""
UNKNOWN_NOISE_CV = 0.10
"""How noisy a finding's run is taken to be when the bank does not know (rows written before
``noise_cv`` was stored): a shared machine's run-to-run CV, not a quiet one's."""
RUN_SD = 0.05
"""Added (in quadrature) to each run's finding: one run's baseline and machine state shift all of
its findings together, so two runs agreeing says more than one run's many trials."""
AGE_SD_PER_YEAR = 0.20
"""Added, in proportion to a finding's age: drivers, libraries and the code itself move on."""
OTHER_HARDWARE_SD = 0.15
"""Added (in quadrature) to effects measured on other hardware: they transfer, loosely."""
OTHER_WORKLOAD_SD = 0.30
"""Added, scaled by (1 - similarity), to effects measured on a different workload."""
CLUSTER_ROLES = frozenset({"tensor_parallel", "pipeline_parallel", "virtual_pipeline", "fsdp", "expert_parallel"})
"""Roles whose effects belong to the cluster as much as to the workload: the data-parallel degree a
layout leaves, ZeRO's shards, the pipeline's micro-batches and the links a group spans all follow
the GPU count and the interconnect. Their findings are read on the hardware that measured them only:
a 70B's measured at 64 GPUs (ZeRO 0 and deep pipelines fast) kept a 7B's search on 8 among
pipelined ZeRO-0 layouts (docs/benchmarks.md, "Tensor parallelism priced from the model's shape")."""
OTHER_HARDWARE_WEIGHT = 0.8
"""Closeness of other hardware relative to the same hardware, when choosing which findings to use."""

VERDICTS = frozenset({s.value for s in TrialStatus} | {"not_applicable", "apply_failed"})


@dataclass(frozen=True, kw_only=True, slots=True)
class EffectFinding:
    """A setting's (or patch's) measured effect relative to the baseline, as the time model fitted it."""

    key: str
    role: str
    """The knob's role, or ``patch``."""
    value: KnobValue
    baseline: KnobValue
    """The value the effect is relative to (the knob's default; ``off`` for a patch)."""
    time_log: float
    time_sd: float
    mem_log: float | None = None
    mem_sd: float | None = None
    n: int = 1
    noise_cv: float | None = None
    """Doctor's run-to-run CV of the run that measured it (None: not known)."""
    prior_log: float | None = None
    """The time effect the run's own priors expected (None: they had no belief): read elsewhere, the
    finding is its surprise over them added to that workload's own prior (``priors_for``)."""

    def __post_init__(self) -> None:
        for name in ("time_log", "time_sd", "mem_log", "mem_sd", "noise_cv", "prior_log"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"effect {self.key!r}: {name} must be finite")
        if self.time_sd <= 0 or (self.mem_sd is not None and self.mem_sd <= 0):
            raise ValueError(f"effect {self.key!r}: sds must be positive")
        if (self.mem_log is None) != (self.mem_sd is None):
            raise ValueError(f"effect {self.key!r}: mem_log and mem_sd go together")
        if self.n < 1:
            raise ValueError(f"effect {self.key!r}: n must be >= 1")
        if self.noise_cv is not None and self.noise_cv < 0:
            raise ValueError(f"effect {self.key!r}: noise_cv must be >= 0")


@dataclass(frozen=True, kw_only=True, slots=True)
class PatchFinding:
    patch: str
    verdict: str
    """A trial status (ok, numerics, crash, oom…), or not_applicable / apply_failed."""
    time_log: float | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"patch {self.patch!r}: verdict {self.verdict!r} is not one of {sorted(VERDICTS)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class BestConfig:
    candidate: Candidate
    speedup: float
    """Verified speed-up over the baseline (2.0: twice as fast)."""
    interval: tuple[float, float]
    """Its confidence interval."""

    def __post_init__(self) -> None:
        low, high = self.interval
        if not (math.isfinite(self.speedup) and self.speedup > 0 and 0 < low <= high):
            raise ValueError(f"best config: speedup {self.speedup} with interval {self.interval} is not valid")


@dataclass(frozen=True, kw_only=True, slots=True)
class Seed:
    """A past best configuration, with where it came from and how alike that workload was."""

    candidate: Candidate
    speedup: float
    interval: tuple[float, float]
    similarity: float
    same_hardware: bool
    run_id: str
    signature: str
    hardware_id: str
    hardware: str
    recorded_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredEffect:
    id: int
    """What ``infrarsi bank forget`` takes to delete this one finding."""
    key: str
    baseline: str
    time_log: float
    time_sd: float
    """As recorded: the fit's sd."""
    n: int
    noise_cv: float | None
    trusted_sd: float
    """What the bank reads it as today (``finding_sd``), before hardware and workload widening."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredRun:
    id: str
    signature: str
    hardware_id: str
    hardware: str
    recorded_at: datetime
    effects: list[StoredEffect]
    verdicts: list[tuple[str, str]]
    """(patch, verdict)."""
    best: list[tuple[dict, float]]
    """(candidate, verified speedup)."""


@dataclass(frozen=True, slots=True)
class Forgotten:
    runs: int
    effects: int
    verdicts: int
    best: int


@dataclass(frozen=True, slots=True)
class _Observed:
    row: EffectRow
    run: RunRow
    closeness: float
    similarity: float
    same_hardware: bool


def resolve_url(url: str | None = None) -> str:
    """``url``, else ``INFRARSI_BANK_URL``, else the per-user SQLite file; ``~`` expanded."""
    raw = url or os.environ.get(URL_ENV) or DEFAULT_URL
    parsed = make_url(raw)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        parsed = parsed.set(database=str(path))
    return parsed.render_as_string(hide_password=False)


def _engine(url: str) -> Engine:
    if make_url(url).get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # WAL: readers never block the writer and writers queue on the busy timeout.
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    return engine


def _create_tables(engine: Engine) -> None:
    # Two processes opening a fresh bank race on CREATE TABLE and CREATE INDEX, object by object:
    # the loser sees "already exists" and passes again. Each failure is a table or an index the
    # other created, so one pass per object and one more always finish (counting the tables alone,
    # a loser behind on the indexes gave up in CI).
    attempts = sum(1 + len(table.indexes) for table in Base.metadata.tables.values()) + 1
    for attempt in range(attempts):
        try:
            Base.metadata.create_all(engine)
            break
        except (exc.OperationalError, exc.ProgrammingError, exc.IntegrityError):
            if attempt == attempts - 1:
                raise
    _migrate(engine)


def _migrate(engine: Engine) -> None:
    """Add the columns a bank written by an older InfraRSI lacks (``schema.ADDED_COLUMNS``, all
    nullable: old rows read them as NULL). Two processes may race; the loser finds the column."""
    for table, columns in ADDED_COLUMNS.items():
        for column, sql_type in columns:
            if column in {c["name"] for c in inspect(engine).get_columns(table)}:
                continue
            try:
                with engine.begin() as conn:
                    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}"))
            except (exc.OperationalError, exc.ProgrammingError):
                if column not in {c["name"] for c in inspect(engine).get_columns(table)}:
                    raise


def _aware(when: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; they were written in UTC."""
    return when if when.tzinfo else when.replace(tzinfo=UTC)


T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086)
"""Student's t 97.5% quantiles for 1..20 degrees of freedom (scipy.stats.t.ppf(0.975, df); written
out because importing scipy.stats costs `infrarsi bank show` seconds)."""


def _few_trials(n: int) -> float:
    """How much wider than sd/sqrt(n) an estimate from n trials is to be read: Student's t with n
    degrees of freedom (the baseline adds one) over the normal quantile, at 95%; past 20 the
    normal's own (t is within 4% of it there)."""
    return T_975[n - 1] / 1.959964 if n <= len(T_975) else 1.0


def finding_sd(time_log: float, time_sd: float, n: int, noise_cv: float | None, age_days: float) -> float:
    """How far one stored finding of a step-time effect is to be trusted, in log units.

    At least what its ``n`` trials can say against a baseline given the run's noise: one trial's
    log-ratio to the baseline has sd sqrt(2)·cv (``infrarsi.noise``), n trials sqrt(2)·cv/sqrt(n),
    widened by Student's t for small n; never tighter than the fit that produced it said; plus a
    run's shared shift (``RUN_SD``) and drift with age. A single trial cannot tell an effect from a
    disturbed run (a busy machine makes one trial 12x slower): its band reaches back to no effect.
    """
    cv = max(noise_cv if noise_cv is not None else UNKNOWN_NOISE_CV, MIN_NOISE_CV)
    sampling = math.sqrt(2) * cv / math.sqrt(n) * _few_trials(n)
    sd = math.sqrt(max(time_sd, sampling) ** 2 + RUN_SD**2 + (AGE_SD_PER_YEAR * max(age_days, 0.0) / 365.25) ** 2)
    return max(sd, abs(time_log)) if n < 2 else sd


def _pool(pairs: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Precision-weighted mean and sd of (mean, sd) estimates (None when there are none)."""
    if not pairs:
        return None
    weights = [1.0 / s**2 for _, s in pairs]
    total = sum(weights)
    return sum(w * m for w, (m, _) in zip(weights, pairs, strict=True)) / total, max(total**-0.5, MIN_SD)


def _deleted(session: Session, statement: Delete) -> int:
    """How many rows ``statement`` deleted: a DML statement's result is a CursorResult, which
    Session.execute's declared Result does not say."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount


def _clip(mean: float, sd: float) -> tuple[float, float]:
    return max(-MAX_ABS_LOG, min(MAX_ABS_LOG, mean)), max(BASELINE_SD, min(MAX_SD, sd))


class ExperienceBank:
    """Findings from past runs in one database; a context manager that disposes its engine."""

    def __init__(self, url: str | None = None):
        self.url = resolve_url(url)
        self.engine = _engine(self.url)
        _create_tables(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> ExperienceBank:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writing

    def record_run(
        self,
        *,
        signature: WorkloadSignature,
        hardware_id: str,
        hardware: str,
        effects: Iterable[EffectFinding] = (),
        verdicts: Iterable[PatchFinding] = (),
        best: Iterable[BestConfig] = (),
        recorded_at: datetime | None = None,
    ) -> str:
        """Store one run's findings in one transaction; returns the new run's id."""
        run = RunRow(id=uuid.uuid4().hex, signature=signature.key, signature_json=signature.to_json(),
                     hardware_id=hardware_id, hardware=hardware,
                     recorded_at=recorded_at or datetime.now(UTC))
        run.effects = [EffectRow(key=e.key, role=e.role, value=str(e.value), baseline=str(e.baseline),
                                 time_log=e.time_log, time_sd=e.time_sd, mem_log=e.mem_log, mem_sd=e.mem_sd, n=e.n,
                                 noise_cv=e.noise_cv, prior_log=e.prior_log)
                       for e in effects]
        run.verdicts = [VerdictRow(patch=v.patch, verdict=v.verdict, time_log=v.time_log, detail=v.detail)
                        for v in verdicts]
        run.best = [BestRow(candidate_json=json.dumps(b.candidate.to_dict(), sort_keys=True), speedup=b.speedup,
                            low=b.interval[0], high=b.interval[1]) for b in best]
        with self._session.begin() as session:
            session.add(run)
        return run.id

    # ---------------------------------------------------------------- reading

    def _runs(self, signature: WorkloadSignature, *relations: QueryableAttribute[Any]) -> list[tuple[RunRow, float]]:
        """Runs of workloads at least MIN_SIMILARITY alike, with their similarity."""
        with self._session() as session:
            runs = session.scalars(select(RunRow).options(*(selectinload(r) for r in relations))).all()
        scored = [(run, signature.similarity(WorkloadSignature.from_json(run.signature_json))) for run in runs]
        return [(run, sim) for run, sim in scored if sim >= MIN_SIMILARITY]

    def similar_runs(self, signature: WorkloadSignature) -> dict[str, float]:
        """Run id -> workload similarity, for the runs alike enough to be used for ``signature``."""
        return {run.id: sim for run, sim in self._runs(signature)}

    def seeds(self, signature: WorkloadSignature, hardware_id: str, k: int = 5) -> list[Seed]:
        """Up to ``k`` distinct past best configurations: the same workload first, then similar ones;
        at equal likeness, the same hardware before other hardware, then the larger speed-up."""
        found = [
            Seed(candidate=Candidate.from_dict(json.loads(best.candidate_json)), speedup=best.speedup,
                 interval=(best.low, best.high), similarity=sim, same_hardware=run.hardware_id == hardware_id,
                 run_id=run.id, signature=run.signature, hardware_id=run.hardware_id, hardware=run.hardware,
                 recorded_at=run.recorded_at)
            for run, sim in self._runs(signature, RunRow.best) for best in run.best
        ]
        # Likeness is rounded so that float noise between near-identical workloads does not
        # outrank the same-hardware preference.
        found.sort(key=lambda s: (-round(s.similarity, 2), not s.same_hardware, -s.speedup))
        unique: dict[str, Seed] = {}
        for seed in found:
            unique.setdefault(seed.candidate.key(), seed)
        return list(unique.values())[:k]

    def verdicts(self, signature: WorkloadSignature,
                 hardware_id: str) -> dict[str, list[tuple[PatchFinding, float, bool]]]:
        """Past verdicts per patch on alike workloads: (finding, similarity, same hardware), closest first."""
        out: dict[str, list[tuple[PatchFinding, float, bool]]] = defaultdict(list)
        for run, sim in self._runs(signature, RunRow.verdicts):
            for v in run.verdicts:
                finding = PatchFinding(patch=v.patch, verdict=v.verdict, time_log=v.time_log, detail=v.detail)
                out[v.patch].append((finding, sim, run.hardware_id == hardware_id))
        for items in out.values():
            items.sort(key=lambda item: (-round(item[1], 2), not item[2]))
        return dict(out)

    def priors_for(self, signature: WorkloadSignature, hardware_id: str, *,
                   baselines: Mapping[str, KnobValue] | None = None, reference: PriorTable | None = None,
                   now: datetime | None = None) -> PriorTable:
        """Observed effects as priors: for each key the closest findings (same workload and hardware
        best), each read no surer than its trials (``finding_sd``), pooled, then widened for every
        way their context differs from this one.

        ``baselines`` (knob name -> this run's default) drops effects measured against another
        default, since an effect is relative to its baseline; patches always compare to "off".
        A parallel layout's findings (``CLUSTER_ROLES``) are read on the hardware that measured them only.
        ``reference``: this run's own priors. A finding whose run recorded what its own priors
        expected is read as its surprise over them added to this run's prior for the key: what
        the priors price from each workload's shape and hardware (tensor parallelism's all-reduces
        on a narrow model against a wide one) is not carried from one to the other.
        """
        now = now or datetime.now(UTC)
        observed: dict[str, list[_Observed]] = defaultdict(list)
        for run, sim in self._runs(signature, RunRow.effects):
            same = run.hardware_id == hardware_id
            for row in run.effects:
                knob = Setting.parse(row.key).name
                if not same and row.role in CLUSTER_ROLES:
                    continue
                if baselines is not None and row.role != "patch" and (
                        knob not in baselines or str(baselines[knob]) != row.baseline):
                    continue
                closeness = sim * (1.0 if same else OTHER_HARDWARE_WEIGHT)
                observed[row.key].append(_Observed(row, run, closeness, sim, same))
        priors = []
        for key, items in observed.items():
            best = max(item.closeness for item in items)
            closest = [item for item in items if math.isclose(item.closeness, best, rel_tol=1e-9)]
            expected = reference.get(key).time_log_mean if reference is not None and key in reference else None
            priors.append(self._prior(key, closest, now, expected))
        return PriorTable.of(priors)

    @staticmethod
    def _prior(key: str, items: list[_Observed], now: datetime, expected: float | None) -> Prior:
        """``expected``: this run's own prior mean for ``key`` (None: it has none), which a finding
        with its own run's expectation recorded is re-based on."""
        sim, same = items[0].similarity, items[0].same_hardware
        widen = (0.0 if same else OTHER_HARDWARE_SD) ** 2 + (OTHER_WORKLOAD_SD * (1 - sim)) ** 2
        ages = [(now - _aware(item.run.recorded_at)).total_seconds() / 86400 for item in items]
        rebased = [item.row.prior_log is not None and expected is not None for item in items]
        pooled = _pool([
            (item.row.time_log - item.row.prior_log + expected
             if item.row.prior_log is not None and expected is not None else item.row.time_log,
             finding_sd(item.row.time_log, item.row.time_sd, item.row.n, item.row.noise_cv, age))
            for item, age in zip(items, ages, strict=True)])
        assert pooled is not None  # items holds at least the closest finding
        time_mean, time_sd = pooled
        # Memory is near-deterministic per run; only the run's shift and age widen it.
        mem = _pool([(item.row.mem_log, math.sqrt(max(item.row.mem_sd, MIN_SD) ** 2 + RUN_SD**2
                                                  + (AGE_SD_PER_YEAR * max(age, 0.0) / 365.25) ** 2))
                     for item, age in zip(items, ages, strict=True)
                     if item.row.mem_log is not None and item.row.mem_sd is not None])  # set together or not at all
        # Memory never measured here: no effect expected, and no confidence either.
        mem_mean, mem_sd = mem if mem is not None else (0.0, 1.0)
        time_mean, time_sd = _clip(time_mean, math.sqrt(time_sd**2 + widen))
        mem_mean, mem_sd = _clip(mem_mean, math.sqrt(mem_sd**2 + widen))
        runs = {item.run.id for item in items}
        where = "this hardware" if same else f"other hardware ({items[0].run.hardware})"
        cvs = [item.row.noise_cv for item in items]
        noise = ("run noise unknown" if all(c is None for c in cvs)
                 else f"run noise CV {max(c for c in cvs if c is not None):.1%}")
        return Prior(key=key, time_log_mean=time_mean, time_log_sd=time_sd, mem_log_mean=mem_mean,
                     mem_log_sd=mem_sd, source=f"bank: {sum(item.row.n for item in items)} trial(s) in {len(runs)} "
                                               f"run(s) on {where}, {noise}, newest {min(ages):.0f} day(s) old, "
                                               f"workload similarity {sim:.2f}"
                                               + (", read as its surprise over its run's own priors" if any(rebased)
                                                  else ""))

    # ---------------------------------------------------------------- inspecting and forgetting

    def runs(self) -> list[StoredRun]:
        """Every run in the bank with its findings, oldest first."""
        with self._session() as session:
            rows = session.scalars(select(RunRow).options(selectinload(RunRow.effects), selectinload(RunRow.verdicts),
                                                          selectinload(RunRow.best))).all()
        now = datetime.now(UTC)
        out = []
        for run in sorted(rows, key=lambda r: _aware(r.recorded_at)):
            age = (now - _aware(run.recorded_at)).total_seconds() / 86400
            out.append(StoredRun(
                id=run.id, signature=run.signature, hardware_id=run.hardware_id, hardware=run.hardware,
                recorded_at=_aware(run.recorded_at),
                effects=[StoredEffect(id=e.id, key=e.key, baseline=e.baseline, time_log=e.time_log,
                                      time_sd=e.time_sd, n=e.n, noise_cv=e.noise_cv,
                                      trusted_sd=finding_sd(e.time_log, e.time_sd, e.n, e.noise_cv, age))
                         for e in sorted(run.effects, key=lambda e: e.key)],
                verdicts=[(v.patch, v.verdict) for v in run.verdicts],
                best=[(json.loads(b.candidate_json), b.speedup) for b in run.best]))
        return out

    def forget(self, *, finding: str | None = None, run_id: str | None = None,
               before: datetime | None = None) -> Forgotten:
        """Delete findings: one by its id or every one of a key (``threads=2``, ``patch:sdpa_attention``,
        with that patch's verdicts), one run with everything it recorded, or every run recorded before
        ``before``. Exactly one of the three; what was deleted is counted."""
        if sum(x is not None for x in (finding, run_id, before)) != 1:
            raise ValueError("forget needs exactly one of a finding, a run id or a date")
        with self._session.begin() as session:
            if finding is not None:
                where = EffectRow.id == int(finding) if finding.isdigit() else EffectRow.key == finding
                effects = _deleted(session, delete(EffectRow).where(where))
                verdicts = 0
                if finding.startswith(PATCH_PREFIX):
                    verdicts = _deleted(session, delete(VerdictRow).where(VerdictRow.patch == Setting.parse(finding).name))
                return Forgotten(runs=0, effects=effects, verdicts=verdicts, best=0)
            if run_id is not None:
                ids = [run_id]
            else:
                assert before is not None  # exactly one of the three, checked above
                cut = _aware(before)
                ids = [r.id for r in session.scalars(select(RunRow)).all() if _aware(r.recorded_at) < cut]
            # Children first: SQLite enforces the cascade only with its foreign-key pragma on.
            counts = [_deleted(session, delete(t).where(t.run_id.in_(ids))) for t in (EffectRow, VerdictRow, BestRow)]
            runs = _deleted(session, delete(RunRow).where(RunRow.id.in_(ids)))
        return Forgotten(runs=runs, effects=counts[0], verdicts=counts[1], best=counts[2])
