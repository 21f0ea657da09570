"""An OpenAI-compatible chat-completions endpoint on 127.0.0.1 for tests: the response and
error bodies follow the API's JSON (``chat.completion`` objects; ``{"error": {"message"}}``)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_completion(model: str, text: str) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}


class StubHandler(BaseHTTPRequestHandler):
    """Subclasses implement ``answer(body) -> (status, payload)``; every call is counted."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.count += 1
        status, payload = self.answer(body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def answer(self, body):  # pragma: no cover - overridden
        raise NotImplementedError

    def log_message(self, *args):
        pass


def serve(handler):
    """A running stub server on 127.0.0.1 (a free port); call ``.shutdown()`` when done."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.count = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
