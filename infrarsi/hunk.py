"""A changed region of a file: what a patch or a trial's workspace shows for review.

A leaf value: the patch library makes hunks and the runner records them, neither importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hunk:
    """One changed region of one file, as a unified-diff hunk."""

    path: str
    header: str
    """``@@ -a,b +c,d @@``"""
    text: str
