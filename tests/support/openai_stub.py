"""OpenAI-compatible endpoints on 127.0.0.1 for tests: chat completions and image generations;
the response and error bodies follow the API's JSON (``chat.completion`` objects, ``{"created",
"data": [{"b64_json"}]}``, ``{"error": {"message"}}``)."""

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_completion(model: str, text: str) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}


def images_response(images) -> dict:
    """``POST /images/generations``'s answer for PIL ``images``, as PNG in base64."""
    data = []
    for image in images:
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        data.append({"b64_json": base64.b64encode(buf.getvalue()).decode("ascii")})
    return {"created": 0, "data": data}


class StubHandler(BaseHTTPRequestHandler):
    """Subclasses implement ``answer(body) -> (status, payload)``; every call is counted."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.count += 1
        self.server.paths.append(self.path)
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
    server.count, server.paths = 0, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class DrawingHandler(StubHandler):
    """An images endpoint that draws with ``server.draw(prompt) -> PIL image`` (a local
    pipeline), one image per request (``n`` > 1 is refused as the API would refuse a bad field)."""

    def answer(self, body):
        if not self.path.endswith("/images/generations"):
            return 404, {"error": {"message": f"no route {self.path}"}}
        if body.get("n", 1) != 1 or not isinstance(body.get("prompt"), str):
            return 400, {"error": {"message": "expected one string prompt and n=1"}}
        with self.server.lock:  # one pipeline, one call at a time
            image = self.server.draw(body["prompt"])
        return 200, images_response([image])


def serve_drawings(draw):
    """A running images endpoint drawing with ``draw``; ``.shutdown()`` when done."""
    server = serve(DrawingHandler)
    server.draw, server.lock = draw, threading.Lock()
    return server
