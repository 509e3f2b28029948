#!/usr/bin/env python3
"""Renders the tool-calling conversations of `tool_goldens.json` with Hugging Face
transformers' own chat-template rendering (`render_jinja_template`, what
`tokenizer.apply_chat_template(..., tools=...)` calls), offline.

Usage: make_tool_goldens.py  (writes tool_goldens.json next to this file)

Each case: a template file of this directory, its BOS/EOS texts, messages, tools,
template keyword arguments and `add_generation_prompt`; the golden is the rendered text,
or the error message when the template raises. `crates/llm/tests/chat_tool_templates.rs`
renders the same inputs with tempra's `ChatTemplate` and compares.
"""

import json
import datetime
import pathlib

import transformers
from transformers.utils.chat_template_utils import render_jinja_template

HERE = pathlib.Path(__file__).parent


class FixedDate(datetime.datetime):
    """`strftime_now` (gpt-oss's "Current date") renders 2025-01-01; the test masks the
    date of both sides."""

    @classmethod
    def now(cls, tz=None):
        return cls(2025, 1, 1, 12, 0, 0)


transformers.utils.chat_template_utils.datetime = FixedDate

TEMPLATES = {
    # file: (bos_token, eos_token)
    "qwen2.5-tools.jinja": ("", "<|im_end|>"),
    "qwen3.jinja": ("", "<|im_end|>"),
    "llama3.1-tools.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral-nemo.jinja": ("<s>", "</s>"),
    "hermes2-pro-tools.jinja": ("<|begin_of_text|>", "<|im_end|>"),
    "gpt-oss.jinja": ("<|startoftext|>", "<|return|>"),
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather \u2014 \"now\" <b>in</b> a city & its 'region' (\u00f1, \u65e5\u672c, \U0001F600)",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "description": "Days ahead"},
                "precise": {"type": "number", "default": 0.5, "description": "Precision"},
            },
            "required": ["city", "unit"],
        },
    },
}

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
            },
            "required": ["query"],
        },
    },
}

CALL = {
    "id": "call12345",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 2}},
}
CALL2 = {
    "id": "call67890",
    "type": "function",
    "function": {"name": "search", "arguments": {"query": "rain \"today\"", "tags": ["a", "b"]}},
}

CASES = [
    ("tools_first_turn", [{"role": "user", "content": "What is the weather in Paris?"}],
     [WEATHER, SEARCH], {}, True),
    ("tools_with_system", [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather?"},
    ], [WEATHER], {}, True),
    ("tool_round_trip", [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the weather in Paris?"},
        # Clients send `"content": null`; tempra renders it as "" (as llama.cpp does: Qwen 3's
        # template needs a string), so the goldens give "".
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21 degrees and clear."},
        {"role": "user", "content": "Thanks!"},
    ], [WEATHER, SEARCH], {}, True),
    ("parallel_calls", [
        {"role": "user", "content": "Weather and news?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": [CALL, CALL2]},
        {"role": "tool", "tool_call_id": "call12345", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call67890", "content": "no news"},
    ], [WEATHER, SEARCH], {}, True),
    ("no_tools", [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ], None, {}, True),
    ("reasoning_history", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Adding two and two."},
        {"role": "user", "content": "And 3+3?"},
    ], None, {}, True),
    ("thinking_off", [{"role": "user", "content": "Quick: 1+1?"}], None, {"enable_thinking": False}, True),
    ("thinking_on_tools", [{"role": "user", "content": "Weather in Oslo?"}], [WEATHER],
     {"enable_thinking": True}, True),
    ("llama_kwargs", [{"role": "user", "content": "Weather?"}], [WEATHER],
     {"tools_in_user_message": False, "date_string": "01 Jan 2025"}, True),
]


def main() -> None:
    out = {"transformers": transformers.__version__, "cases": []}
    for file, (bos, eos) in TEMPLATES.items():
        source = (HERE / file).read_text().rstrip("\n")
        for name, messages, tools, kwargs, add_generation_prompt in CASES:
            case = {
                "template": file,
                "case": name,
                "bos_token": bos,
                "eos_token": eos,
                "messages": messages,
                "tools": tools,
                "kwargs": kwargs,
                "add_generation_prompt": add_generation_prompt,
            }
            try:
                rendered, _ = render_jinja_template(
                    conversations=[messages],
                    tools=tools,
                    chat_template=source,
                    add_generation_prompt=add_generation_prompt,
                    bos_token=bos,
                    eos_token=eos,
                    **kwargs,
                )
                case["rendered"] = rendered[0]
            except Exception as e:  # the template's raise_exception, a type error, ...
                case["error"] = str(e)
            out["cases"].append(case)
    (HERE / "tool_goldens.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(out['cases'])} cases")


if __name__ == "__main__":
    main()
