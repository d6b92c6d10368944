"""The image classifier of tests/test_data/stages/vision after the real ``init`` and ``doctor``,
prepared once for the patch tests that run it (read-only: each test copies it)."""

from pathlib import Path

import pytest

from tests.stages.conftest import copy_repo, measured_copy

VISION = Path(__file__).parents[1] / "test_data" / "stages" / "vision"


@pytest.fixture(scope="session")
def prepared_vision(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 1 GiB: oneDNN's convolution and matmul buffers outgrow the stage tests' 128 MiB budget.
    return measured_copy(VISION, tmp_path_factory.mktemp("vision") / "vision", budget_bytes=2**30)


@pytest.fixture
def vision_job(prepared_vision: Path, tmp_path: Path) -> Path:
    """This test's own copy of the prepared classifier."""
    return copy_repo(prepared_vision, tmp_path / "vision")
