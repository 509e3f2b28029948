#!/usr/bin/env python3
"""Two `tempra serve` replicas behind HAProxy, one of them stopped with SIGTERM midway.

    python3 deploy/test_replicas.py TEMPRA_BINARY MODEL.gguf

Starts two replicas on loopback ports, waits until both answer `GET /health` with 200,
starts HAProxy in the foreground with deploy/haproxy/haproxy.cfg, then sends REQUESTS
completions (streamed and not, alternately) from CLIENTS threads through HAProxy. Once
SIGTERM_AFTER of them have completed, and while replica1 is streaming at least one,
replica1 gets SIGTERM (the streams sent from then until the signal are long ones, so
that one is running on replica1 however slow the machine). Checks:

- every request got HTTP 200 and a whole answer: `max_tokens` tokens and a
  `finish_reason` (streams: every event, the usage, then `data: [DONE]`);
- the requests replica1 was streaming when SIGTERM came finished (HAProxy's X-Backend
  header says which replica answered), and replica1 exited with status 0 after them;
- replica1's `/health` said `draining` (503) during its drain, or it had already
  stopped listening.

Python 3 standard library only; needs `haproxy` on PATH (Debian: apt-get install
haproxy). Prints a summary; exits 1 on a failed check.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CONFIG = Path(__file__).resolve().parent / "haproxy" / "haproxy.cfg"
HOST = "127.0.0.1"
# Tokens of the streams sent between SIGTERM_AFTER completions and the signal.
LONG_STREAM_TOKENS = 256


def free_port() -> int:
    """A loopback port free now (the OS's choice)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
    """`GET path` on a fresh connection: status and body."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def wait_ready(port: int, process: subprocess.Popen, deadline: float) -> list[str]:
    """Polls `GET /health` until 200; returns what it saw before (refused, 503 loading)."""
    seen = []
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process on port {port} exited with {process.returncode}")
        try:
            status, body = get(port, "/health", timeout=2.0)
        except OSError:
            state = "refused"
        else:
            if status == 200:
                return seen
            state = f"{status} {json.loads(body).get('status')}" if body.startswith("{") else str(status)
        if not seen or seen[-1] != state:
            seen.append(state)
        time.sleep(0.02)
    raise RuntimeError(f"port {port} never became ready: {seen}")


@dataclass
class Result:
    """One request's outcome."""

    index: int
    stream: bool
    max_tokens: int
    start: float = 0.0
    head: float = 0.0
    end: float = 0.0
    status: int = 0
    backend: str = ""
    complete: bool = False
    error: str = ""
    tokens: int = 0


def completion(port: int, result: Result) -> None:
    """Sends request `result.index` through HAProxy and checks its answer."""
    body = {
        "prompt": f"request {result.index}: once upon a time",
        "max_tokens": result.max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": result.stream,
    }
    if result.stream:
        body["stream_options"] = {"include_usage": True}
    result.start = time.monotonic()
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        result.head = time.monotonic()
        result.status = response.status
        result.backend = response.getheader("X-Backend", "")
        if response.status != 200:
            result.error = response.read().decode("utf-8", "replace")[:300]
            return
        if result.stream:
            finish, done, usage = None, False, None
            for raw in response:
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    done = True
                    continue
                event = json.loads(data)
                if "error" in event:
                    result.error = json.dumps(event["error"])
                    return
                for choice in event.get("choices", []):
                    finish = choice.get("finish_reason") or finish
                usage = event.get("usage") or usage
            result.tokens = (usage or {}).get("completion_tokens", 0)
            result.complete = done and finish is not None
        else:
            reply = json.loads(response.read())
            finish = reply["choices"][0].get("finish_reason")
            result.tokens = reply.get("usage", {}).get("completion_tokens", 0)
            result.complete = finish is not None
        if result.tokens != result.max_tokens:
            result.complete = False
            result.error = f"{result.tokens} tokens of {result.max_tokens}"
    except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
        result.error = f"{type(e).__name__}: {e}"
    finally:
        result.end = time.monotonic()
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tempra", help="the tempra binary")
    parser.add_argument("model", help="a GGUF model (a tiny random one will do)")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--sigterm-after", type=int, default=80,
                        help="completed requests before replica1 gets SIGTERM")
    parser.add_argument("--haproxy", default="haproxy")
    args = parser.parse_args()
    if shutil.which(args.haproxy) is None:
        print(f"{args.haproxy} is not on PATH (apt-get install haproxy)", file=sys.stderr)
        return 1

    began = time.monotonic()
    logs = Path(tempfile.mkdtemp(prefix="tempra-replicas-"))
    ports = {"replica1": free_port(), "replica2": free_port()}
    front = free_port()
    replicas: dict[str, subprocess.Popen] = {}
    haproxy = None
    failures: list[str] = []
    try:
        for name, port in ports.items():
            log = open(logs / f"{name}.log", "w")
            replicas[name] = subprocess.Popen(
                [args.tempra, "serve", "-m", args.model, "--port", str(port),
                 "--threads", "1", "--kv-slots", "4", "--ctx", "512",
                 "--drain-timeout", "60"],
                stdout=log, stderr=subprocess.STDOUT,
                env={k: v for k, v in os.environ.items() if k != "TEMPRA_API_KEY"},
            )
        startup = {name: wait_ready(port, replicas[name], time.monotonic() + 60)
                   for name, port in ports.items()}
        ready = time.monotonic()

        env = {**os.environ, "TEMPRA_LISTEN": f"{HOST}:{front}",
               "TEMPRA_REPLICA1": f"{HOST}:{ports['replica1']}",
               "TEMPRA_REPLICA2": f"{HOST}:{ports['replica2']}"}
        haproxy_log = open(logs / "haproxy.log", "w")
        haproxy = subprocess.Popen([args.haproxy, "-db", "-f", str(CONFIG)], env=env,
                                   stdout=haproxy_log, stderr=subprocess.STDOUT)
        wait_ready(front, haproxy, time.monotonic() + 30)

        results = [Result(i, stream=i % 2 == 0, max_tokens=16 + i % 17)
                   for i in range(args.requests)]
        lock = threading.Lock()
        next_index = [0]
        signalled = threading.Event()

        def client() -> None:
            while True:
                with lock:
                    if next_index[0] >= len(results):
                        return
                    result = results[next_index[0]]
                    next_index[0] += 1
                    if (result.stream and result.index >= args.sigterm_after
                            and not signalled.is_set()):
                        result.max_tokens = LONG_STREAM_TOKENS
                completion(front, result)

        load_start = time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()

        # SIGTERM to replica1 once enough requests are done and it is streaming.
        victim = replicas["replica1"]
        sigterm_at = None
        while sigterm_at is None and any(t.is_alive() for t in threads):
            done = sum(1 for r in results if r.end)
            streaming = [r for r in results if r.stream and r.backend == "replica1"
                         and r.head and not r.end]
            if done >= args.sigterm_after and streaming:
                victim.send_signal(signal.SIGTERM)
                sigterm_at = time.monotonic()
                signalled.set()
            else:
                time.sleep(0.001)
        drain_health = []
        exit_code, exited_at = None, None
        while sigterm_at is not None and exited_at is None:
            if victim.poll() is not None:
                exit_code, exited_at = victim.returncode, time.monotonic()
                break
            if time.monotonic() - sigterm_at > 90:
                failures.append("replica1 did not exit within 90 s of SIGTERM")
                break
            try:
                status, body = get(ports["replica1"], "/health", timeout=2.0)
                state = f"{status} {json.loads(body).get('status')}"
            except (OSError, ValueError):
                state = "refused"
            if not drain_health or drain_health[-1] != state:
                drain_health.append(state)
            time.sleep(0.01)
        for t in threads:
            t.join()
        load_end = time.monotonic()

        # The checks.
        failed = [r for r in results if r.status != 200 or not r.complete]
        for r in failed[:10]:
            failures.append(f"request {r.index} (stream={r.stream}, {r.backend or 'no backend'}): "
                            f"HTTP {r.status} {r.error}")
        if len(failed) > 10:
            failures.append(f"... and {len(failed) - 10} more failed requests")
        if sigterm_at is None:
            failures.append("replica1 never got SIGTERM (no stream of it in flight?)")
            in_drain = []
        else:
            # Answered by replica1 and in progress when SIGTERM came (HAProxy sends a
            # request that a draining replica refused to the other one).
            in_drain = [r for r in results if r.backend == "replica1"
                        and r.start < sigterm_at < r.end]
            streams_in_drain = [r for r in in_drain if r.stream and r.head < sigterm_at]
            if not streams_in_drain:
                failures.append("no replica1 stream was running when SIGTERM came")
            if exit_code != 0:
                failures.append(f"replica1 exited with {exit_code} after SIGTERM")
            late = [r.index for r in in_drain if exited_at and r.end > exited_at + 0.5]
            if late:
                failures.append(f"requests {late} ended after replica1 exited")
            # Until the signal is handled "200 ok", then "503 draining", then refused.
            order = ["200 ok", "503 draining", "refused"]
            ranks = [order.index(s) if s in order else -1 for s in drain_health]
            if -1 in ranks or ranks != sorted(ranks):
                failures.append(f"replica1's /health during the drain: {drain_health}")
            after = [r for r in results if r.start > sigterm_at + 1.0 and r.backend == "replica1"]
            if after:
                failures.append(f"{len(after)} requests sent to replica1 a second after SIGTERM")

        # The summary (HAProxy's log is whole once it has stopped: SIGUSR1 is its
        # graceful stop).
        haproxy.send_signal(signal.SIGUSR1)
        haproxy.wait(timeout=30)
        with open(logs / "haproxy.log") as f:
            lines = [line for line in f if "/v1/completions" in line]
        redispatched = sum(1 for line in lines if "/+" in line)
        per_backend = {name: sum(1 for r in results if r.backend == name) for name in ports}
        print(f"replicas ready in {ready - began:.1f} s (health before ready: {startup})")
        print(f"{len(results)} requests from {args.clients} clients in {load_end - load_start:.1f} s:"
              f" {sum(r.stream for r in results)} streamed, "
              f"{sum(not r.stream for r in results)} whole; "
              f"{len(results) - len(failed)} complete with HTTP 200, {len(failed)} failed")
        print(f"answered by: {per_backend}; haproxy log: {len(lines)} completions, "
              f"{redispatched} redispatched after a refusal")
        if sigterm_at is not None:
            done_then = sum(1 for r in results if r.end and r.end <= sigterm_at)
            exit_after = f"{exited_at - sigterm_at:.2f} s" if exited_at else "never"
            print(f"SIGTERM to replica1 at {sigterm_at - load_start:.2f} s "
                  f"({done_then} requests done): {len(in_drain)} requests in progress there "
                  f"({sum(r.stream and r.head < sigterm_at for r in in_drain)} streaming) all "
                  f"{'finished' if all(r.complete for r in in_drain) else 'NOT finished'}; "
                  f"replica1 exited {exit_code} {exit_after} after SIGTERM; "
                  f"its /health meanwhile: {drain_health}")
        print(f"whole run {time.monotonic() - began:.1f} s; logs in {logs}")
    except Exception as e:  # noqa: BLE001 - report and clean up
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        for process in [*replicas.values(), haproxy]:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in [*replicas.values(), haproxy]:
            if process is not None:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        print(f"logs in {logs}", file=sys.stderr)
        return 1
    print("replicas check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
