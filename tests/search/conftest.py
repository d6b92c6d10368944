"""Shared fixtures for the search tests: synthetic spaces (no processes)."""

from __future__ import annotations

import pytest

from infrarsi.search.space import SearchSpace
from infrarsi.search.synthetic import DENSE_PATCHES, contract_with, dense_knobs


@pytest.fixture
def dense_space() -> SearchSpace:
    return SearchSpace.from_contract(contract_with(dense_knobs()), DENSE_PATCHES)
