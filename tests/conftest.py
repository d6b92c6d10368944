"""Suite-wide: end-to-end tests (real trials, real git, a real LSP client) run after the fast ones;
every test runs offline and away from the user's own InfraRSI state."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)


@pytest.fixture(autouse=True)
def _offline_and_private(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No Anthropic key (nothing leaves the machine; the built-in priors are used), an experience
    bank of the test's own (the user's ~/.infrarsi/bank.db is never read or written) and a cache
    folder of the session's (the shared bytecode prefix is warmed once per run, away from the
    user's ~/.cache). A test that wants any of them sets it again with monkeypatch."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    bank = tmp_path_factory.mktemp("bank") / "bank.db"
    monkeypatch.setenv("INFRARSI_BANK_URL", f"sqlite:///{bank}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
