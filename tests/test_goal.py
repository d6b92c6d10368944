"""Goal parsing: the rules for the common forms, and the LLM path with the real anthropic client
against a loopback server that answers in the Messages API format."""

from __future__ import annotations

import pytest

from infrarsi.goal import EXAMPLES, Goal, GoalError, parse_goal, parse_rules
from infrarsi.llm import LLMConfig
from tests.support.messages_server import (
    MessagesServer,
    error_reply,
    malformed_reply,
    text_reply,
    tool_use_reply,
)

GIB, MIB = 2**30, 2**20


def goal(text: str, **fields) -> Goal:
    return Goal(text=text, **fields)


@pytest.mark.parametrize(("text", "expected"), [
    ("faster", {}),
    ("make it faster", {}),
    ("Make the training job faster, please!", {}),
    ("speed up", {}),
    ("quicker training", {}),
    ("fit in 12 GiB", {"budget_bytes": 12 * GIB}),
    ("fits into 1.5 GiB", {"budget_bytes": int(1.5 * GIB)}),
    ("under 512 MiB", {"budget_bytes": 512 * MIB}),
    ("faster, fit in 12 GB", {"budget_bytes": 12 * 10**9}),
    ("at most 30 trials", {"trials": 30}),
    ("faster in 30 trials", {"trials": 30}),
    ("up to 1 trial", {"trials": 1}),
    ("20 minutes", {"minutes": 20.0}),
    ("faster in 20 minutes", {"minutes": 20.0}),
    ("within 2 hours", {"minutes": 120.0}),
    ("90 min", {"minutes": 90.0}),
    ("don't touch data.py", {"exclude": ["data.py"]}),
    ("do not change data.py and model/attention.py", {"exclude": ["data.py", "model/attention.py"]}),
    ("leave data.py, utils.py alone", {"exclude": ["data.py", "utils.py"]}),
    ("faster, fit in 12 GiB, at most 30 trials, don't touch data.py",
     {"budget_bytes": 12 * GIB, "trials": 30, "exclude": ["data.py"]}),
    ("make it faster within 45 minutes and under 8 GiB; never edit data.py",
     {"minutes": 45.0, "budget_bytes": 8 * GIB, "exclude": ["data.py"]}),
    ("faster, at most 8 trials", {"trials": 8}),
])
def test_the_rules_read_the_common_forms(text, expected):
    parsed = parse_rules(text)
    assert parsed == goal(text, **expected)
    assert parse_goal(text) == parsed and parsed.understood_by == "rules"


@pytest.mark.parametrize("text", ["", "bake me a cake", "faster and cheaper", "use 12 GiB of", "translate data.py"])
def test_anything_else_is_a_goal_error_with_examples(text):
    assert parse_rules(text) is None
    with pytest.raises(GoalError) as caught:
        parse_goal(text)
    message = str(caught.value)
    assert repr(text) in message and "Try one of" in message
    assert all(example in message for example in EXAMPLES)


def test_without_a_key_the_model_is_never_asked():
    with MessagesServer() as server:
        config = LLMConfig(api_key=None, base_url=server.url)
        with pytest.raises(GoalError):
            parse_goal("make the loss go down quicker on the big box", config)
        assert server.requests == []


def _config(server: MessagesServer) -> LLMConfig:
    return LLMConfig(api_key="test-key", base_url=server.url, max_retries=0, timeout_s=10, model="claude-test")


UNREAD = "squeeze the training job into the small card and don't spend more than an hour on it"


def test_the_model_reads_what_the_rules_cannot():
    with MessagesServer() as server:
        server.script(tool_use_reply("set_goal", {
            "understood": True, "memory_budget_gib": 12, "max_trials": None, "max_minutes": 60,
            "exclude_paths": ["data.py"],
        }))
        parsed = parse_goal(UNREAD, _config(server))
        assert parsed == Goal(text=UNREAD, budget_bytes=12 * GIB, minutes=60, exclude=["data.py"],
                              understood_by="anthropic:claude-test")
        (request,) = server.requests
        body = request.body
        assert "test-key" in (request.headers.get("x-api-key") or request.headers.get("authorization", ""))
        assert body["model"] == "claude-test"
        assert body["tool_choice"] == {"type": "tool", "name": "set_goal"}
        assert [t["name"] for t in body["tools"]] == ["set_goal"]
        assert UNREAD in body["messages"][0]["content"]


def test_a_goal_the_rules_read_never_reaches_the_model():
    with MessagesServer() as server:
        assert parse_goal("faster, fit in 12 GiB", _config(server)).budget_bytes == 12 * GIB
        assert server.requests == []


@pytest.mark.parametrize(("reply", "why"), [
    (malformed_reply(), "model call failed"),
    (text_reply("Sure! I'd make it faster."), "did not read it as a goal"),
    (tool_use_reply("set_goal", {"understood": False}), "did not read it as a goal"),
    (tool_use_reply("set_goal", {"understood": True, "memory_budget_gib": -3}), "invalid memory budget"),
    (tool_use_reply("set_goal", {"understood": True, "max_trials": 2.5}), "invalid trial count"),
    (tool_use_reply("set_goal", {"understood": True, "max_minutes": "soon"}), "invalid time budget"),
    (tool_use_reply("set_goal", {"understood": True, "exclude_paths": "data.py"}), "invalid paths"),
    (tool_use_reply("set_goal", ["not", "an", "object"]), "did not read it as a goal"),
    (error_reply(529, "overloaded_error", "Overloaded"), "model call failed"),
])
def test_a_bad_model_answer_is_a_goal_error(reply, why):
    with MessagesServer() as server:
        server.script(reply)
        with pytest.raises(GoalError) as caught:
            parse_goal(UNREAD, _config(server))
        assert why in str(caught.value) and "Try one of" in str(caught.value)
        assert len(server.requests) == 1
