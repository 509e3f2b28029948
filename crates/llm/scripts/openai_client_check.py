#!/usr/bin/env python3
"""Checks `tempra serve` with the official `openai` Python client.

Usage: openai_client_check.py TEMPRA_BINARY MODEL.gguf

Starts the server on an ephemeral loopback port with an API key (`TEMPRA_API_KEY`), then
drives it with `openai.OpenAI`: models, completions and chat (streamed and not), log
probabilities (a scored prompt against `tempra logits` on the same tokens), embeddings,
and the
errors the client maps to exceptions (400 -> BadRequestError, 401 ->
AuthenticationError). Exits non-zero on the first failure. Run by .ci/run in a virtual
environment (`pip install openai`); cargo tests never need it.
"""

import json
import math
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
        check_logprobs(openai.OpenAI(base_url=base_url, api_key=API_KEY), binary, model_path)
        check_embeddings(openai.OpenAI(base_url=base_url, api_key=API_KEY))
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

    # n continuations: continuation j equals a request with seed + j.
    sampled = {"max_tokens": 6, "temperature": 1.0, "top_p": 1.0, "extra_body": {"ignore_eos": True}}
    pair = client.completions.create(model="m", prompt="Once upon", n=2, seed=11, **sampled)
    texts = [c.text for c in sorted(pair.choices, key=lambda c: c.index)]
    alone = [client.completions.create(model="m", prompt="Once upon", seed=11 + j, **sampled)
             .choices[0].text for j in range(2)]
    assert texts == alone, (texts, alone)
    try:
        client.completions.create(model="m", prompt="x", n=3)
        raise AssertionError("n=3 was accepted with 2 slots")
    except openai.BadRequestError as e:
        assert e.body["param"] == "n", e.body
    try:
        client.chat.completions.create(model="m", messages=messages, max_tokens=0)
        raise AssertionError("max_tokens=0 was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "max_tokens", e.body


def check_embeddings(client: "openai.OpenAI") -> None:
    """`/v1/embeddings` through the client (which asks for base64 and decodes it): unit
    vectors, the same for the same text wherever it sits in a batch."""
    batch = client.embeddings.create(model="m", input=["the cat", "a dog ran", "the cat"])
    vectors = [d.embedding for d in sorted(batch.data, key=lambda d: d.index)]
    assert len(vectors) == 3 and len(vectors[0]) > 0, batch
    for v in vectors:
        assert abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-5, v[:4]
    assert vectors[0] == vectors[2] and vectors[0] != vectors[1]
    alone = client.embeddings.create(model="m", input="a dog ran", encoding_format="float")
    assert alone.data[0].embedding == vectors[1]
    assert batch.usage.prompt_tokens > 0, batch.usage


def log_softmax(row):
    top = max(row)
    lse = top + math.log(sum(math.exp(x - top) for x in row))
    return [x - lse for x in row]


def check_logprobs(client: "openai.OpenAI", binary: str, model_path: str) -> None:
    """Prompt scoring (`echo`, `logprobs`, `max_tokens=0`) against `tempra logits` on the
    same tokens: each prompt token's log-probability and the five best alternatives equal
    the log-softmax of the logits of the position before it (within 1e-4)."""
    ids = [1, 17, 60, 101, 7, 42, 250]
    scored = client.completions.create(model="m", prompt=ids, echo=True, logprobs=5,
                                       max_tokens=0)
    lp = scored.choices[0].logprobs
    assert len(lp.tokens) == len(ids) and lp.token_logprobs[0] is None, lp
    out = subprocess.run(
        [binary, "logits", "-m", model_path, "--ctx", "256", "--threads", "1",
         "--tokens", ",".join(map(str, ids))],
        check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)["logits"]
    for i in range(1, len(ids)):
        want = log_softmax(rows[i - 1])
        assert abs(lp.token_logprobs[i] - want[ids[i]]) <= 1e-4, (i, lp.token_logprobs[i])
        best = sorted(want, reverse=True)[:5]
        got = sorted(lp.top_logprobs[i].values(), reverse=True)
        # Tokens with the same text share a key: the likelier one is listed.
        assert all(any(abs(g - b) <= 1e-4 for b in best) for g in got), (i, got, best)
        assert abs(got[0] - best[0]) <= 1e-4, (i, got, best)

    chat = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hello!"}], max_tokens=4,
        temperature=0, logprobs=True, top_logprobs=5, extra_body={"ignore_eos": True})
    content = chat.choices[0].logprobs.content
    assert len(content) == 4, content
    for entry in content:
        alternatives = [t.logprob for t in entry.top_logprobs]
        assert len(alternatives) == 5 and alternatives == sorted(alternatives, reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert entry.token == entry.top_logprobs[0].token, entry
        assert abs(entry.logprob - alternatives[0]) <= 1e-6, entry
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                       logprobs=True, top_logprobs=21)
        raise AssertionError("top_logprobs=21 was accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "top_logprobs", e.body


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
