"""The `infrarsi` command: one module per subcommand, each parsing options and calling one core function."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines `add_parser(subparsers)`, which registers its command and sets `func`.
COMMANDS = ("optimize", "init", "doctor", "run", "report", "apply", "verify", "trial", "bank")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; given the command about to run, only its module is imported (the stages pull in
    torch and scipy, seconds of start-up that `infrarsi apply` should not pay)."""
    parser = argparse.ArgumentParser(
        prog="infrarsi",
        description="Measured, verified speed-ups for PyTorch training jobs.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in (command,) if command in COMMANDS else COMMANDS:
        importlib.import_module(f"infrarsi.cli.{name}").add_parser(sub)
    return parser


# Commands that take the owner's launch command after `--` (`infrarsi init . -- python train.py …`).
TAKES_COMMAND = ("init", "optimize")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    workload: list[str] | None = None
    if command in TAKES_COMMAND and "--" in argv:
        cut = argv.index("--")
        argv, workload = argv[:cut], argv[cut + 1:]
    args = build_parser(command).parse_args(argv)
    if command in TAKES_COMMAND:
        args.workload_command = workload
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        from infrarsi.cli.console import err

        err("interrupted; every trial already measured is kept.")
        return 130


if __name__ == "__main__":
    sys.exit(main())
