#!/usr/bin/env python3
"""Checks `tempra serve`'s structured output with the official `openai` Python client.

Usage: openai_structured_check.py TEMPRA_BINARY MODEL.gguf

Starts the server on an ephemeral loopback port over a random-weight model (its chat
template is tempra's ChatML fallback, which writes tool calls in the Hermes format), then:

- `client.chat.completions.parse(..., response_format=PydanticModel)` on 100 requests over
  varied schemas (nested models, lists, enums, literals, optional fields, unbounded
  strings, dates), seeds, temperatures and `max_tokens` from the shortest output the
  schema allows (the server's 400 says how many tokens that is) up to generous ones:
  every reply must parse into the model (the client raises on `finish_reason: length`);
- `tool_choice` required and a named function, streamed and not: every call's arguments
  must validate against its pydantic model (`pydantic_function_tool`);
- bad inputs: an unsupported schema keyword and an unknown named function are 400s with
  `param` naming the field.

Exits non-zero on the first failure and prints how long it took. Run by .ci/run in the
same virtual environment as openai_client_check.py; cargo tests never need it.
"""

import datetime
import enum
import json
import re
import subprocess
import sys
import time
from typing import List, Literal, Optional

import openai
import pydantic


class Color(str, enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    street: str
    city: str
    zip_code: Optional[str]


class Person(pydantic.BaseModel):
    name: str
    age: int
    email: Optional[str]
    address: Address


class Inventory(pydantic.BaseModel):
    items: List[str]
    counts: List[int]
    in_stock: bool


class Paint(pydantic.BaseModel):
    color: Color
    finish: Literal["matte", "gloss"]
    litres: float


class Step(pydantic.BaseModel):
    explanation: str
    output: str


class Reasoning(pydantic.BaseModel):
    steps: List[Step]
    final_answer: str


class Event(pydantic.BaseModel):
    title: str
    day: datetime.date
    attendees: List[Person]


SCHEMAS = [Person, Inventory, Paint, Reasoning, Event]


class GetWeather(pydantic.BaseModel):
    """Current weather in a city."""

    city: str
    unit: Literal["celsius", "fahrenheit"]


class SearchFlights(pydantic.BaseModel):
    """Flights between two airports."""

    origin: str
    destination: str
    passengers: int
    cabins: List[Literal["economy", "business"]]


TOOLS = {"GetWeather": GetWeather, "SearchFlights": SearchFlights}


def main() -> int:
    binary, model_path = sys.argv[1], sys.argv[2]
    began = time.monotonic()
    server = subprocess.Popen(
        [binary, "serve", "-m", model_path, "--port", "0", "--kv-slots", "2", "--ctx", "2048",
         "--threads", "2"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen, match = [], None
        while match is None:
            line = server.stderr.readline()
            if not line:
                print("the server did not start:\n" + "".join(seen), file=sys.stderr)
                return 1
            seen.append(line)
            match = re.search(r"http://(\S+)", line)
        client = openai.OpenAI(base_url=f"http://{match.group(1)}/v1", api_key="none", max_retries=0)
        parsed = check_parse(client)
        calls = check_tools(client)
        check_refusals(client)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"openai structured check: ok ({parsed} of {parsed} parsed, {calls} tool calls valid, "
          f"{time.monotonic() - began:.1f}s)")
    return 0


def shortest(client: "openai.OpenAI", model) -> int:
    """The fewest tokens the schema's shortest reply takes, from the server's 400."""
    try:
        client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "x"}],
                                      response_format=model, max_tokens=1)
    except openai.BadRequestError as e:
        assert e.body["param"] == "max_tokens", e.body
        return int(re.search(r"takes (\d+) tokens", e.body["message"]).group(1))
    raise AssertionError("max_tokens=1 was accepted")


def check_parse(client: "openai.OpenAI") -> int:
    done = 0
    for i, model in enumerate(SCHEMAS):
        least = shortest(client, model)
        budgets = [least, least + 1, least + 7, 2 * least, 300]
        for j in range(20):
            max_tokens = budgets[j % len(budgets)]
            completion = client.chat.completions.parse(
                model="m",
                messages=[{"role": "system", "content": "Reply in JSON."},
                          {"role": "user", "content": f"Give me a {model.__name__}, please ({j})."}],
                response_format=model,
                max_tokens=max_tokens,
                seed=1000 * i + j,
                temperature=[0.0, 0.7, 1.0, 1.3][j % 4],
            )
            choice = completion.choices[0]
            assert choice.finish_reason == "stop", choice
            assert isinstance(choice.message.parsed, model), choice.message
            assert completion.usage.completion_tokens <= max_tokens, completion.usage
            done += 1
    assert done == 100, done
    return done


def validate_call(call, only=None) -> None:
    name = call.function.name
    assert name in TOOLS, name
    if only is not None:
        assert name == only, (name, only)
    TOOLS[name].model_validate_json(call.function.arguments)
    assert call.id and call.type == "function", call


def check_tools(client: "openai.OpenAI") -> int:
    tools = [openai.pydantic_function_tool(m) for m in TOOLS.values()]
    messages = [{"role": "user", "content": "Weather in Oslo, then flights to Rome."}]
    checked = 0
    for seed in range(6):
        choice = "required" if seed % 2 == 0 else {"type": "function", "function": {"name": "SearchFlights"}}
        only = None if choice == "required" else "SearchFlights"
        done = client.chat.completions.create(model="m", messages=messages, tools=tools, tool_choice=choice,
                                              seed=seed, max_tokens=200, temperature=1.0)
        assert done.choices[0].finish_reason == "tool_calls", done
        for call in done.choices[0].message.tool_calls:
            validate_call(call, only)
            checked += 1
        # Streamed: the deltas add up to calls that validate too.
        stream = client.chat.completions.create(model="m", messages=messages, tools=tools, tool_choice=choice,
                                                seed=seed, max_tokens=200, temperature=1.0, stream=True)
        calls, finish = {}, None
        for chunk in stream:
            if not chunk.choices:
                continue
            finish = chunk.choices[0].finish_reason or finish
            for d in chunk.choices[0].delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"id": d.id, "name": d.function.name, "arguments": ""})
                entry["arguments"] += d.function.arguments or ""
        assert finish == "tool_calls", finish
        assert calls, "no streamed calls"
        for entry in calls.values():
            assert entry["name"] in TOOLS and (only is None or entry["name"] == only), entry
            TOOLS[entry["name"]].model_validate_json(entry["arguments"])
            checked += 1
        # The calls and their results go back in the next turn.
        call = done.choices[0].message.tool_calls[0]
        follow = client.chat.completions.create(
            model="m", max_tokens=4, tools=tools,
            messages=messages + [
                {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"ok": True})},
            ])
        assert follow.choices[0].message.role == "assistant", follow
    return checked


def check_refusals(client: "openai.OpenAI") -> None:
    bad = {"type": "json_schema",
           "json_schema": {"name": "x", "schema": {"type": "integer", "multipleOf": 7}}}
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                       response_format=bad)
        raise AssertionError("an unsupported schema keyword was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "response_format.json_schema.schema.multipleOf", e.body
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                       tools=[openai.pydantic_function_tool(GetWeather)],
                                       tool_choice={"type": "function", "function": {"name": "Nope"}})
        raise AssertionError("an unknown function was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "tool_choice", e.body


if __name__ == "__main__":
    sys.exit(main())
