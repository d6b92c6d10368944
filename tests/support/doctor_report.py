"""A doctor report for code that takes one: the report test data's (tests/test_data/report/doctor.json)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from infrarsi.records import DoctorReport

DOCTOR_JSON = Path(__file__).parents[1] / "test_data" / "report" / "doctor.json"


def doctor_report(**fields: Any) -> DoctorReport:
    """The test data's report, the given fields replaced."""
    return replace(DoctorReport.from_dict(json.loads(DOCTOR_JSON.read_text())), **fields)
