"""A setting: one knob at one value, or one patch turned on; and its key, the text that names it.

The key is how priors, the search space's columns, the study's findings and the experience bank
name a setting (``micro_batch_size=8``, ``dtype=bfloat16``, ``patch:sdpa_attention``). It is
written by ``Setting.key`` and read back by ``Setting.parse``, nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from infrarsi.contract import KnobValue

PATCH_PREFIX = "patch:"

SettingKey = str
"""``knob=value`` (the value as ``str`` spells it: ``compile=True``) or ``patch:name``."""


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    """The knob's name, or the patch's."""
    value: str = ""
    """The knob's value as ``str`` spells it; empty for a patch."""
    patch: bool = False

    @classmethod
    def knob(cls, name: str, value: KnobValue) -> Setting:
        return cls(name, str(value))

    @classmethod
    def of_patch(cls, name: str) -> Setting:
        return cls(name, patch=True)

    @classmethod
    def parse(cls, key: SettingKey) -> Setting:
        if key.startswith(PATCH_PREFIX):
            return cls.of_patch(key.removeprefix(PATCH_PREFIX))
        name, sep, value = key.partition("=")
        if not sep or not name:
            raise ValueError(f"{key!r} is not a setting key (knob=value or {PATCH_PREFIX}name)")
        return cls(name, value)

    @property
    def key(self) -> SettingKey:
        return PATCH_PREFIX + self.name if self.patch else f"{self.name}={self.value}"

    @property
    def dim(self) -> str:
        """What the setting moves: the knob's name, or ``patch:name``."""
        return self.key if self.patch else self.name


def setting_key(knob: str, value: KnobValue) -> SettingKey:
    """``str(value)``, as the search space spells it: ``compile=True``, ``dtype=bfloat16``."""
    return Setting.knob(knob, value).key


def patch_key(name: str) -> SettingKey:
    return Setting.of_patch(name).key
