#!/usr/bin/env python3
"""Checks `tempra serve` with the official `openai` Python client.

Usage: openai_client_check.py TEMPRA_BINARY MODEL.gguf

Starts the server on an ephemeral loopback port with an API key (`TEMPRA_API_KEY`), then
drives it with `openai.OpenAI`: models, completions and chat (streamed and not), and the
errors the client maps to exceptions (400 -> BadRequestError, 401 ->
AuthenticationError). Exits non-zero on the first failure. Run by .ci/run in a virtual
environment (`pip install openai`); cargo tests never need it.
"""

import os
import re
import subprocess
import sys

import openai

API_KEY = "sk-openai-client-check"


def main() -> int:
    binary, model_path = sys.argv[1], sys.argv[2]
    server = subprocess.Popen(
        [binary, "serve", "-m", model_path, "--port", "0", "--kv-slots", "2", "--ctx", "256",
         "--threads", "1"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TEMPRA_API_KEY": API_KEY},
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
        base_url = f"http://{match.group(1)}/v1"
        check(openai.OpenAI(base_url=base_url, api_key=API_KEY))
        check_refusals(openai.OpenAI(base_url=base_url, api_key=API_KEY),
                       openai.OpenAI(base_url=base_url, api_key="sk-wrong", max_retries=0))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print("openai client check: ok")
    return 0


def check(client: "openai.OpenAI") -> None:
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids, ids

    greedy = {"temperature": 0, "max_tokens": 8, "extra_body": {"ignore_eos": True}}
    done = client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Once upon", **greedy)
    assert done.object == "text_completion", done
    assert done.usage.completion_tokens == 8, done.usage
    assert done.choices[0].finish_reason == "length", done

    streamed = client.completions.create(model=ids[0], prompt="Once upon", stream=True, **greedy)
    text = "".join(chunk.choices[0].text for chunk in streamed if chunk.choices)
    assert text == done.choices[0].text, (text, done.choices[0].text)

    messages = [{"role": "user", "content": "Hello!"}]
    chat = client.chat.completions.create(model="gpt-4o", messages=messages, **greedy)
    assert chat.choices[0].message.role == "assistant", chat
    assert chat.usage.completion_tokens == 8, chat.usage
    streamed = client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                              stream_options={"include_usage": True}, **greedy)
    parts, usage = [], None
    for chunk in streamed:
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
    assert "".join(parts) == chat.choices[0].message.content
    assert usage is not None and usage.completion_tokens == 8, usage

    try:
        client.completions.create(model="m", prompt="x", n=2)
        raise AssertionError("n=2 was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "n", e.body
    try:
        client.chat.completions.create(model="m", messages=messages, max_tokens=0)
        raise AssertionError("max_tokens=0 was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "max_tokens", e.body


def check_refusals(client: "openai.OpenAI", wrong_key: "openai.OpenAI") -> None:
    try:
        wrong_key.models.list()
        raise AssertionError("a wrong API key was accepted")
    except openai.AuthenticationError as e:
        assert e.status_code == 401, e
        assert e.body["code"] == "invalid_api_key", e.body
    try:
        client.chat.completions.create(model="m", messages=[{"role": "admin", "content": "x"}])
        raise AssertionError("an unknown role was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "messages[0].role", e.body


if __name__ == "__main__":
    sys.exit(main())
