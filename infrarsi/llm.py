"""How InfraRSI reaches Anthropic: one typed config, one client factory, shared by every LLM caller.

Settings come from, first match wins per field: the environment (``ANTHROPIC_API_KEY``,
``INFRARSI_ANTHROPIC_MODEL``, ``ANTHROPIC_BASE_URL``, ``INFRARSI_LLM_TIMEOUT_S``,
``INFRARSI_LLM_MAX_RETRIES``), the repo's ``.infrarsi/config.toml``, the user's
``~/.infrarsi/config.toml``, then defaults. Where the key goes (``base_url``) and the key itself
(``api_key``) come only from the environment or the user's file: a repository is someone else's
code, and its config must not send the user's key to a server it names (a warning says it was
ignored). The config files use one table::

    [anthropic]
    model = "claude-sonnet-4-5"
    api_key = "…"          # prefer the environment; a file key is for a private machine
    base_url = "http://127.0.0.1:8080"
    timeout_s = 60
    max_retries = 2

An invalid value falls back to the default and is named in ``LLMConfig.warnings`` rather than
raising, so a typo in a config file never stops a run (the built-in priors still work).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from infrarsi.records.doctor import DoctorReport
from infrarsi.records.files import llm_config_path

DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_TOKENS = 4096

if TYPE_CHECKING:  # importing the client costs seconds; only a real call needs it
    import anthropic
    from anthropic.types import ToolParam

USER_ONLY = ("api_key", "base_url")
"""Settings a repository's config may not make."""

_ENV = {
    "api_key": "ANTHROPIC_API_KEY",
    "model": "INFRARSI_ANTHROPIC_MODEL",
    "base_url": "ANTHROPIC_BASE_URL",
    "timeout_s": "INFRARSI_LLM_TIMEOUT_S",
    "max_retries": "INFRARSI_LLM_MAX_RETRIES",
}



DOCTOR_KEYS_FOR_MODEL = ("hardware", "noise", "phases", "memory", "efficiency", "findings", "warnings")
"""What of doctor.json a model is shown. Never the losses nor the parameter checksum: the trial's
checks compare a candidate with them, and a model that has read them can write a diff that prints
them. The per-run records are left out too (long, and said better by the phases and findings)."""


def doctor_for_model(doctor: DoctorReport | None) -> dict[str, Any] | None:
    """The part of a doctor report that may go into a prompt, as doctor.json writes it; None when
    doctor has not run."""
    if doctor is None:
        return None
    written = doctor.to_dict()
    return {k: written[k] for k in DOCTOR_KEYS_FOR_MODEL}


@dataclass(frozen=True, kw_only=True, slots=True)
class LLMConfig:
    api_key: str | None = None
    """None: no key configured, so no LLM calls are made."""
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    """None: the client's own default endpoint."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Per request attempt; the client retries timeouts too."""
    max_retries: int = DEFAULT_MAX_RETRIES
    """Retries after the first attempt, on timeouts, connection errors, 408/409/429 and 5xx."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    warnings: tuple[str, ...] = field(default=(), compare=False)
    """Settings that were ignored, and why."""

    @property
    def configured(self) -> bool:
        return bool(self.api_key)


def _read_file(path: Path, warnings: list[str]) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        warnings.append(f"{path}: unreadable ({err}); ignored")
        return {}
    table = data.get("anthropic", {})
    if not isinstance(table, dict):
        warnings.append(f"{path}: [anthropic] must be a table; ignored")
        return {}
    return table


def _coerce(name: str, raw: Any, where: str, warnings: list[str]) -> Any:
    """A valid value for field ``name``, or None (with a warning) when ``raw`` is not one."""
    try:
        if name in ("api_key", "model", "base_url"):
            if not isinstance(raw, str) or not raw.strip():
                raise ValueError("must be a non-empty string")
            return raw.strip()
        if name == "timeout_s":
            value = float(raw)
            if not (math.isfinite(value) and value > 0):
                raise ValueError("must be a positive number")
            return value
        if name == "max_retries":
            if isinstance(raw, bool) or int(raw) != float(raw) or int(raw) < 0:
                raise ValueError("must be a whole number >= 0")
            return int(raw)
    except (TypeError, ValueError) as err:
        warnings.append(f"{where}: {name}={raw!r} {err}; using the default")
    return None


def load_llm_config(repo: Path | None = None, *, env: Mapping[str, str] | None = None,
                    home: Path | None = None) -> LLMConfig:
    """Resolve the Anthropic settings for ``repo`` (env, repo config, user config, defaults)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    warnings: list[str] = []
    layers: list[tuple[str, Mapping[str, Any]]] = [
        ("environment", {f: env[v] for f, v in _ENV.items() if env.get(v)}),
    ]
    if repo is not None:
        path = llm_config_path(repo)
        table = _read_file(path, warnings)
        for name in USER_ONLY:
            if name in table:
                warnings.append(f"{path}: {name} is ignored in a repository's config (it would decide where your "
                                f"API key is sent); set it in the environment or {llm_config_path(home)}")
        layers.append((str(path), {k: v for k, v in table.items() if k not in USER_ONLY}))
    user = llm_config_path(home)
    layers.append((str(user), _read_file(user, warnings)))
    values: dict[str, Any] = {}
    for where, layer in layers:
        for name in _ENV:
            if name in values or name not in layer:
                continue
            value = _coerce(name, layer[name], where, warnings)
            if value is not None:
                values[name] = value
    return LLMConfig(**values, warnings=tuple(warnings))


def make_client(config: LLMConfig) -> anthropic.Anthropic:
    """The real client, with every setting explicit so nothing else on the machine changes it.

    Passing ``api_key`` stops the client from consulting profiles or federation settings.
    """
    if not config.configured:
        raise ValueError("no Anthropic API key configured (set ANTHROPIC_API_KEY)")
    import anthropic

    return anthropic.Anthropic(
        api_key=config.api_key,
        base_url=config.base_url,
        timeout=config.timeout_s,
        max_retries=config.max_retries,
    )


class MalformedReply(ValueError):
    """The reply does not have the structure the tool demands."""


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolReply(Generic[T]):
    """One forced tool call's outcome: the parsed input, or why there is none."""

    value: T | None = None
    reason: str = ""
    """Empty when ok; else ``timeout``, ``connection``, ``rate_limited``, ``api_error`` or ``malformed``."""
    message: str = ""
    replied: bool = False
    """Whether a reply came back and was read, whatever it said."""

    @property
    def ok(self) -> bool:
        return not self.reason


def call_tool(config: LLMConfig, tool: ToolParam, prompt: str, parse: Callable[[Any], T], *,
              system: str | None = None, max_tokens: int | None = None) -> ToolReply[T]:
    """Ask the configured model to call ``tool`` once on ``prompt`` and ``parse`` its input (raising
    :class:`MalformedReply`, or another ValueError, when it is wrong). The one place InfraRSI sends a request: every failure,
    of the network, the API or the reply, comes back as a reason and a message, never raised."""
    import anthropic  # seconds to import; only a real request needs it

    name = tool["name"]
    try:
        message = make_client(config).messages.create(
            model=config.model, max_tokens=max_tokens or config.max_tokens, tools=[tool],
            tool_choice={"type": "tool", "name": name}, messages=[{"role": "user", "content": prompt}],
            system=system or anthropic.omit)
    # Subclasses before their bases: a timeout is a connection error, a 429 a status error.
    except anthropic.APITimeoutError:
        return ToolReply(reason="timeout", message=f"timed out after {config.timeout_s:g} s ({config.max_retries} retries)")
    except anthropic.APIConnectionError as err:
        return ToolReply(reason="connection", message=f"cannot connect ({err})")
    except anthropic.RateLimitError as err:
        return ToolReply(reason="rate_limited",
                         message=f"rate limited (429) after {config.max_retries} retries: {err.message}")
    except anthropic.APIStatusError as err:
        return ToolReply(reason="api_error", message=f"HTTP {err.status_code}: {err.message}")
    except (anthropic.APIResponseValidationError, ValueError) as err:
        # The client raises plain ValueError (JSONDecodeError) on a body that is not JSON.
        return ToolReply(reason="malformed", message=f"unreadable response: {err}")
    except anthropic.AnthropicError as err:
        return ToolReply(reason="api_error", message=str(err))
    calls = [b for b in message.content if b.type == "tool_use" and b.name == name]
    try:
        if len(calls) != 1:
            kinds = [getattr(b, "type", "?") for b in message.content]
            raise MalformedReply(f"expected one {name} call, got content {kinds} (stop_reason {message.stop_reason})")
        return ToolReply(value=parse(calls[0].input), replied=True)
    except ValueError as err:  # MalformedReply, or a value a record refuses
        return ToolReply(reason="malformed", message=f"malformed reply: {err}", replied=True)
