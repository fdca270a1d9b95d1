#!/usr/bin/env python3
"""A scripted OpenAI-compatible model for `scripts/reliability.sh --only resume`.

    scripts/scripted-model.py PORT_FILE LOG_FILE CALLS

Serves `POST /v1/chat/completions` on 127.0.0.1 (a free port, written to PORT_FILE), streaming
(SSE, with usage) or not, as each request asks. It answers from the conversation it is sent,
as a model would, so a driver killed at any moment and resumed gets the answers its
conversation calls for:

- offered `finish_strategy` (the strategist): records the decisions `a` and `b` (one step
  each: append to `a.log` / `b.log`), then finishes;
- otherwise (the executor of step `a` or `b`): with K tool results in the conversation, calls
  `shell_execute` to append `call K+1` to its log while K < CALLS, then answers.

Streams go out in pieces with short pauses, so that a kill can land inside one. Each request
appends `start <role> <step> <results>` to LOG_FILE when it arrives and `end ...` once its
whole reply is written: a request whose key already has an `end` line re-buys an answered
call; one whose key only has a `start` line remakes the call that was in flight.
"""

import json
import os
import random
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, LOG_FILE, CALLS = sys.argv[1], sys.argv[2], int(sys.argv[3])


def decision(key):
    return json.dumps({
        "key": key, "decision_type": "implementation_choice",
        "question": f"What does step {key} do?", "chosen_option": f"append to {key}.log",
        "confidence_score": 0.9, "rationale": "asked for",
        "step": {"instructions": f"append {CALLS} lines to {key}.log, one shell call each"},
    })


def reply(body):
    """(role, step, results, text, calls) for one request."""
    messages = body.get("messages", [])
    tools = [t.get("function", {}).get("name") for t in body.get("tools", [])]
    results = sum(1 for m in messages if m.get("role") == "tool")
    if "finish_strategy" in tools:
        if results < 2:
            return "strategist", "-", results, "", [("record_decision", decision("ab"[results]))]
        return "strategist", "-", results, "", [("finish_strategy", json.dumps({"summary": "two steps"}))]
    first = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    # The step's own instructions open the prompt (its context, which follows, may name the
    # other step).
    found = re.search(r"now: append \d+ lines to (\w)\.log", first if isinstance(first, str) else json.dumps(first))
    step = found.group(1) if found else "?"
    if results < CALLS:
        command = f"printf 'call {results + 1}\\n' >> {step}.log && sleep 0.05"
        return "executor", step, results, "", [("shell_execute", json.dumps({"command": command}))]
    return "executor", step, results, f"Appended {CALLS} lines to {step}.log.", []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        try:
            self.answer()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the driver was killed mid-stream

    def answer(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        role, step, results, text, calls = reply(body)
        key = f"{role} {step} {results}"
        with open(LOG_FILE, "a") as log:
            log.write(f"start {key}\n")
        ids = [f"call_{step}_{results}_{i}_{random.randrange(1 << 30)}" for i in range(len(calls))]
        usage = {"prompt_tokens": 100 + 10 * results, "completion_tokens": 7,
                 "total_tokens": 107 + 10 * results}
        finish = "tool_calls" if calls else "stop"
        model = body.get("model", "m")
        if not body.get("stream"):
            message = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, (n, a) in zip(ids, calls)]
            data = json.dumps({"id": "chatcmpl-s", "object": "chat.completion", "model": model,
                               "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                               "usage": usage}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.ended(key)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()

        def chunk(delta, finish_reason=None, **extra):
            event = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            event.update(extra)
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            time.sleep(random.uniform(0.005, 0.03))

        chunk({"role": "assistant", "content": ""})
        for piece in [text[i:i + 8] for i in range(0, len(text), 8)]:
            chunk({"content": piece})
        for n, (i, (name, args)) in enumerate(zip(ids, calls)):
            chunk({"tool_calls": [{"index": n, "id": i, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]})
            for piece in [args[k:k + 24] for k in range(0, len(args), 24)]:
                chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]})
        chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            self.wfile.write(("data: " + json.dumps({"id": "chatcmpl-s", "object": "chat.completion.chunk",
                                                     "model": model, "choices": [], "usage": usage})
                              + "\n\n").encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True
        self.ended(key)

    def ended(self, key):
        with open(LOG_FILE, "a") as log:
            log.write(f"end {key}\n")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
