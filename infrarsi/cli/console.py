"""One console for the CLI: rich on a terminal, plain text otherwise, JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)


def err(message: str) -> None:
    stderr.print(f"[bold red]error:[/] {message}")


def emit_json(data: Any) -> None:
    """Write one JSON document to stdout (for --json)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
