"""The Anthropic provider with the real client against a loopback Messages API server."""

import math
import time
from dataclasses import replace

import pytest

from infrarsi.llm import LLMConfig
from infrarsi.priors import PriorStatus, builtin_table, default_provider
from infrarsi.priors.anthropic_provider import TOOL_NAME, AnthropicPriors
from tests.support.doctor_report import doctor_report
from tests.support.messages_server import (
    MessagesServer,
    error_reply,
    malformed_reply,
    rate_limited,
    slow_reply,
    text_reply,
    tool_use_reply,
)


@pytest.fixture
def server():
    with MessagesServer() as s:
        yield s


def provider(server, **kw) -> AnthropicPriors:
    settings = dict(api_key="sk-test", model="claude-test", base_url=server.url, timeout_s=5.0, max_retries=0)
    return AnthropicPriors(LLMConfig(**{**settings, **kw}))


def entry(key, t=-0.1, m=0.05, sd=0.2, **kw):
    return {"key": key, "time_log_mean": t, "time_log_sd": sd, "mem_log_mean": m, "mem_log_sd": sd,
            "rationale": "because", **kw}


def test_a_good_reply_becomes_the_table_over_the_builtin_one(server, make_context):
    context = make_context("cpu")
    server.script(tool_use_reply(TOOL_NAME, {"priors": [
        entry("dtype=bfloat16", t=math.log(20), sd=0.3),
        entry("patch:compile_model", t=0.0, sd=0.1, startup_s=35.0),
    ]}))
    result = provider(server).priors(context)
    assert result.status is PriorStatus.OK and result.provider == "anthropic:claude-test", result.message
    bf16 = result.table.get("dtype=bfloat16")
    assert bf16.time_log_mean == pytest.approx(math.log(20)) and bf16.source == "anthropic:claude-test: because"
    assert result.table.get("patch:compile_model").startup_s == 35.0
    # keys the model skipped keep their built-in prior
    assert result.table.get("threads=1") == builtin_table(context).get("threads=1")

    (request,) = server.requests
    body = request.body
    assert request.path == "/v1/messages" and request.headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "claude-test" and body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    (tool,) = body["tools"]
    assert "dtype=bfloat16" in tool["input_schema"]["properties"]["priors"]["items"]["properties"]["key"]["enum"]
    prompt = body["messages"][0]["content"]
    assert "class GPT(torch.nn.Module)" in prompt and "patch:sdpa_attention" in prompt and "AMD EPYC" in prompt


def test_a_prose_reply_falls_back_to_the_builtin_table(server, make_context):
    context = make_context("cpu")
    server.script(text_reply("bf16 is usually faster."))
    result = provider(server).priors(context)
    assert (result.status, result.reason, result.provider) == (PriorStatus.ERROR, "malformed", "builtin")
    assert "expected one record_priors call" in result.message
    assert result.table == builtin_table(context)


def test_a_body_that_is_not_json_falls_back(server, make_context):
    server.script(malformed_reply())
    result = provider(server).priors(make_context("cpu"))
    assert (result.status, result.reason) == (PriorStatus.ERROR, "malformed") and len(result.table) > 0


@pytest.mark.parametrize("tool_input,why", [
    ({"priors": [entry("dtype=int8")]}, "unknown key"),
    ({"priors": [entry("threads=1", sd=0)]}, "time_log_sd"),
    ({"priors": [entry("threads=1", t=math.nan)]}, "finite number"),
    ({"priors": [entry("threads=1", t=9.0)]}, "beyond"),
    ({"priors": [entry("threads=1", t="-0.1")]}, "finite number"),
    ({"priors": [entry("threads=1", t=True)]}, "finite number"),
    ({"priors": [entry("threads=1"), entry("threads=1")]}, "duplicate"),
    ({"priors": [{k: v for k, v in entry("threads=1").items() if k != "rationale"}]}, "rationale"),
    ({"priors": [entry("compile=True", startup_s=-3)]}, "startup_s"),
    ({"priors": []}, "non-empty"),
    ({"estimates": [entry("threads=1")]}, "non-empty 'priors'"),
    ([entry("threads=1")], "non-empty 'priors'"),
    ({"priors": ["threads=1"]}, "must be an object"),
])
def test_a_reply_with_the_wrong_structure_falls_back_naming_the_fault(server, make_context, tool_input, why):
    context = make_context("cpu")
    server.script(tool_use_reply(TOOL_NAME, tool_input))
    result = provider(server).priors(context)
    assert (result.status, result.reason) == (PriorStatus.ERROR, "malformed")
    assert why in result.message and result.table == builtin_table(context)


def test_a_timeout_falls_back_after_the_configured_retries(server, make_context):
    server.script(slow_reply(3.0), slow_reply(3.0))
    start = time.monotonic()
    result = provider(server, timeout_s=0.4, max_retries=1).priors(make_context("cpu"))
    elapsed = time.monotonic() - start
    assert (result.status, result.reason) == (PriorStatus.ERROR, "timeout") and "timed out" in result.message
    assert len(server.requests) == 2 and elapsed < 2.9  # two 0.4 s attempts and a backoff, not the 3 s replies


def test_a_429_is_retried_as_configured_then_falls_back(server, make_context):
    server.script(*[rate_limited(0.01)] * 3)
    result = provider(server, max_retries=2).priors(make_context("cpu"))
    assert (result.status, result.reason) == (PriorStatus.ERROR, "rate_limited") and "429" in result.message
    assert len(server.requests) == 3


def test_a_429_then_a_good_reply_succeeds_on_retry(server, make_context):
    server.script(rate_limited(0.01), tool_use_reply(TOOL_NAME, {"priors": [entry("threads=1")]}))
    result = provider(server, max_retries=1).priors(make_context("cpu"))
    assert result.ok and len(server.requests) == 2


def test_a_client_error_is_not_retried(server, make_context):
    server.script(error_reply(400, "invalid_request_error", "max_tokens: too large"))
    result = provider(server, max_retries=2).priors(make_context("cpu"))
    assert (result.reason, len(server.requests)) == ("api_error", 1) and "max_tokens: too large" in result.message


def test_without_a_key_nothing_is_sent(server, make_context):
    result = provider(server, api_key=None).priors(make_context("cpu"))
    assert (result.status, result.reason, server.requests) == (PriorStatus.ERROR, "not_configured", [])
    assert default_provider(LLMConfig()).priors(make_context("cpu")).provider == "builtin"
    assert isinstance(default_provider(LLMConfig(api_key="k")), AnthropicPriors)


def test_the_prompt_shows_the_doctor_profile_but_never_the_reference_losses(server, make_context):
    measured = doctor_report()
    doctor = replace(measured, findings=["forward 41% of the step"], phases=replace(measured.phases, step_s=0.0871),
                     losses=replace(measured.losses, reference=[6.93817, 6.81244], tolerance=2.5e-6),
                     param_checksum=[12.125, 840.5], runs=[replace(measured.runs[0], step_times=[0.0871, 0.0873])])
    server.script(tool_use_reply(TOOL_NAME, {"priors": [entry("threads=1")]}))
    provider(server).priors(make_context("cpu", doctor=doctor))
    prompt = server.requests[0].body["messages"][0]["content"]
    assert "forward 41% of the step" in prompt and "0.0871" in prompt
    assert "6.93817" not in prompt and "6.81244" not in prompt and "840.5" not in prompt and "0.0873" not in prompt
