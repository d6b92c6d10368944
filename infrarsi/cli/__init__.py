"""The `infrarsi` command: one module per subcommand, each parsing options and calling one core function."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines `add_parser(subparsers)`, which registers its command and sets `func`.
COMMANDS = ("init", "trial", "doctor", "run", "report", "apply", "verify")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infrarsi",
        description="Measured, verified speed-ups for PyTorch training jobs.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"infrarsi.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        from infrarsi.cli.console import err

        err("interrupted; every trial already measured is kept.")
        return 130


if __name__ == "__main__":
    sys.exit(main())
