"""Byte units, defined once: memory budgets, peaks and sizes are bytes everywhere, shown in MiB/GiB."""

from __future__ import annotations

KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40
