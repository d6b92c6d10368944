"""Prior effects of settings and patches: a built-in table, or an Anthropic model over it.

``AnthropicPriors`` lives in :mod:`infrarsi.priors.anthropic_provider` and is imported from there:
importing the ``anthropic`` client costs seconds, which the bank and the built-in table never need.
"""

from infrarsi.llm import LLMConfig
from infrarsi.priors.builtin import BuiltinPriors, builtin_table
from infrarsi.priors.types import (
    Prior,
    PriorContext,
    PriorProvider,
    PriorResult,
    PriorStatus,
    PriorTable,
    neutral_prior,
    patch_key,
    setting_key,
)


def default_provider(config: LLMConfig) -> PriorProvider:
    """The Anthropic provider when a key is configured, the built-in table otherwise."""
    if not config.configured:
        return BuiltinPriors()
    from infrarsi.priors.anthropic_provider import AnthropicPriors

    return AnthropicPriors(config)


__all__ = [
    "BuiltinPriors",
    "Prior",
    "PriorContext",
    "PriorProvider",
    "PriorResult",
    "PriorStatus",
    "PriorTable",
    "builtin_table",
    "default_provider",
    "neutral_prior",
    "patch_key",
    "setting_key",
]
