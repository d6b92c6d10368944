"""What the stages leave behind in ``.infrarsi/``, as typed, versioned values with their load/save.

Below the stages and free of torch, so that the report, ``apply``, the language server, the bank
and the benchmarks read a record without importing what measured it:

- ``files``: every path under ``.infrarsi/`` (``doctor_path``, ``run_path``, ``study_path``, ``patch_dir``,
  ``trials_dir``…).
- ``doctor``: ``DoctorReport`` (``doctor.json``), ``load_doctor``/``save_doctor``, ``DoctorError``.
- ``run``: ``RunResult`` (``run.json``) with its ``TrialRow``, ``PatchCheck``, ``PriorCheckRow``,
  ``MemoryPriceRow``, ``BankPriorRow``; ``load_run``/``save_run``.
- ``disturbance``: ``Disturbance`` (``RunResult.disturbance``), its ``RerunRow`` and ``Renormalization``.
- ``verdict``: ``Verdict``, re-verification's judgement of one candidate.
- ``hardware``: ``HardwareFingerprint`` and ``PeakFlops`` (measured by ``infrarsi.hardware``).
"""

from infrarsi.records.disturbance import Disturbance, Renormalization, RerunRow
from infrarsi.records.doctor import DoctorError, DoctorReport, load_doctor, save_doctor
from infrarsi.records.files import DOCTOR_FILE, RUN_FILE, STUDY_FILE, doctor_path, record_paths, run_path, study_path
from infrarsi.records.hardware import HardwareFingerprint, PeakFlops
from infrarsi.records.run import (
                                  BankPriorRow,
                                  MemoryPriceRow,
                                  PatchCheck,
                                  PriorCheckRow,
                                  RunRecordError,
                                  RunResult,
                                  RunStatus,
                                  TrialRow,
                                  load_run,
                                  save_run,
)
from infrarsi.records.verdict import Verdict

__all__ = [
    "BankPriorRow", "DOCTOR_FILE", "Disturbance", "DoctorError", "DoctorReport", "HardwareFingerprint", "MemoryPriceRow",
    "PatchCheck", "PeakFlops", "PriorCheckRow", "RUN_FILE", "Renormalization", "RerunRow", "RunRecordError", "RunResult",
    "RunStatus", "STUDY_FILE", "TrialRow",
    "Verdict", "doctor_path", "load_doctor", "load_run", "record_paths", "run_path", "save_doctor", "save_run",
    "study_path",
]
