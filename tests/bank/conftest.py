"""One bank suite, every backend: a SQLite file always; PostgreSQL when INFRARSI_TEST_PG_URL is set.

The PostgreSQL database must be one the tests may own: the bank's tables are dropped after each test.
"""

from __future__ import annotations

import os

import pytest

from infrarsi.bank import ExperienceBank
from infrarsi.bank.schema import Base

PG_ENV = "INFRARSI_TEST_PG_URL"


@pytest.fixture(params=["sqlite", "postgresql"])
def bank_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'bank.db'}"
        return
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} not set")
    yield url
    with ExperienceBank(url) as bank:
        Base.metadata.drop_all(bank.engine)


@pytest.fixture
def bank(bank_url):
    with ExperienceBank(bank_url) as bank:
        yield bank
