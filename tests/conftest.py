"""Suite-wide: end-to-end tests (real trials, real git, a real LSP client) run after the fast ones."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)
