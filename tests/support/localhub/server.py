"""TEST SCAFFOLDING: a Hugging Face Hub-compatible server on 127.0.0.1, stdlib only.

It serves local folders as hub repositories so that huggingface_hub, transformers,
diffusers and datasets run their own download code (``from_pretrained("org/name")``,
``load_dataset("org/name")``) with no network. What it serves under real ids is tiny
random-weight models and synthetic rows (:mod:`tests.support.localhub.repos`): never the real
models or data, and no score from it says anything about them.

From a test::

    from tests.support.localhub.server import LocalHubServer

    with LocalHubServer() as hub:                       # port 0: a free port
        hub.add("org/model", "/path/to/folder")         # branch "main"
        hub.add("org/data", "/path/to/folder", repo_type="dataset", revision="refs/convert/parquet")
        hub.add("org/gated", folder, repo_type="dataset", gated=True)  # token ACCEPTED passes
        env = hub.env(hf_home=tmp_path / "hf")          # HF_ENDPOINT, offline switches off, HF_HOME
        subprocess.run([...], env={**os.environ, **env})  # clients read HF_ENDPOINT at import

``tests/conftest.py``'s session fixture ``local_hub`` serves what :func:`tests.support.localhub.repos.add_all`
adds (the headline command's models and scorer networks, every task dataset; MME gated); a test
adds more ids with ``add_models(local_hub, ids=[...])`` (``repos.MODELS``). The token
:data:`ACCEPTED` has accepted every gated repo's terms, :data:`NOT_ACCEPTED` none.

From a shell (builds the same repos once under ``--cache``, then serves until Ctrl-C)::

    python -m tests.support.localhub --port 8765            # prints the export lines to paste
    export HF_ENDPOINT=http://127.0.0.1:8765 HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 TRANSFORMERS_OFFLINE=0

What it answers (found by logging the real clients' requests; ``hub.requests`` keeps them):

* ``GET /api/{models|datasets}/{id}[/revision/{rev}]``: info with ``sha`` and ``siblings``;
* ``GET /api/{type}s/{id}/auth-check`` (``HfApi.auth_check``: the gate below, without a file);
* ``GET /api/{type}s/{id}/tree/{rev}[/{path}]`` (``recursive``) and
  ``POST /api/{type}s/{id}/paths-info/{rev}``: what HfFileSystem lists and stats;
* ``HEAD``/``GET /{id}/resolve/{rev}/{file}`` and ``/datasets/{id}/resolve/...``: headers
  ``X-Repo-Commit``, ``ETag``, ``Content-Length``; LFS-like files (weights, Parquet) answer
  HEAD with a 302 ``Location`` to ``/lfs/<sha256>`` on a second port (the "CDN") and ``X-Linked-Etag``/``X-Linked-Size``,
  as the real hub's CDN redirect; ``Range`` requests get 206;
* a revision is a branch name (``main``, ``refs/convert/parquet``) or the 40-hex commit sha the
  server derives from the folder's files;
* ``GET /api/whoami-v2`` for the two tokens above; any other token is refused (401) on every
  endpoint, as the hub refuses invalid credentials;
* failures as the hub sends them (``X-Error-Code``): an unknown repo 401 (404 with a token)
  ``RepoNotFound``, an unknown revision 404 ``RevisionNotFound``, a missing file 404
  ``EntryNotFound``, a gated repo's file 401 ``GatedRepo`` without a token and 403 with a token
  that has not accepted the terms;
* ``GET /api/agent-harnesses`` (huggingface_hub >= 2 asks): an empty registry.

Going away: :meth:`LocalHubServer.stop` (open connections included); ``hub.go_away_at =
"/api/models/org/x"`` dies on the first request whose path starts so (mid-run, at a known
point: the client's retries then find nothing listening); ``hub.cut_downloads = n`` closes the next
n file downloads halfway.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

#: the token that has accepted every gated repo's terms; any other token has not
ACCEPTED = "hf_localhub_accepted"
NOT_ACCEPTED = "hf_localhub_not_accepted"
#: files the real hub keeps in LFS (by .gitattributes): answered with a CDN-like redirect
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".parquet", ".arrow", ".msgpack", ".h5", ".onnx")
#: files of a smoke build that are no part of what a repo would hold
_SKIP = {"genbench_smoke.json", ".gitattributes_local"}


@dataclass
class _File:
    path: Path
    size: int
    blob: str  # git blob sha1, the ETag of a regular file
    sha256: str | None  # set for LFS files

    @property
    def lfs(self) -> bool:
        return self.sha256 is not None


@dataclass
class _Revision:
    name: str
    folder: Path
    sha: str = ""
    files: dict[str, _File] = field(default_factory=dict)


@dataclass
class _Repo:
    repo_id: str
    repo_type: str
    gated: bool = False
    revisions: dict[str, _Revision] = field(default_factory=dict)

    def find(self, rev: str) -> _Revision | None:
        if rev in self.revisions:
            return self.revisions[rev]
        return next((r for r in self.revisions.values() if r.sha == rev or (len(rev) >= 7 and r.sha.startswith(rev))), None)


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _scan(folder: Path) -> dict[str, _File]:
    files = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or path.name in _SKIP or any(p.startswith(".") for p in rel.split("/")):
            continue
        data = path.read_bytes()
        lfs = rel.endswith(LFS_SUFFIXES)
        files[rel] = _File(path, len(data), _git_blob(data), hashlib.sha256(data).hexdigest() if lfs else None)
    return files


class LocalHubServer:
    """A hub on ``http://127.0.0.1:<port>`` serving registered folders; see the module doc."""

    def __init__(self, port: int = 0, log: str | os.PathLike | None = None):
        self.repos: dict[tuple[str, str], _Repo] = {}
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status)
        self.unrouted: list[tuple[str, str]] = []  # requests no route answers: an endpoint to add
        self.cut_downloads = 0  # the next n file downloads close the connection halfway
        self.go_away_at: str | None = None  # a path prefix: the first request for it finds the server gone
        self.build_root: Path | None = None  # where tests.support.localhub.repos built what it added
        self._log = Path(log) if log else None
        self._lfs: dict[str, _File] = {}
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        # LFS files redirect to another origin, as the hub's CDN: huggingface_hub follows
        # same-origin redirects of HEAD and reads an off-origin one's headers instead
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        for httpd in (self._httpd, self._cdn):
            httpd.daemon_threads = True
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ registry
    def add(self, repo_id: str, folder: str | os.PathLike, *, repo_type: str = "model", revision: str = "main",
            gated: bool = False) -> str:
        """Serve ``folder`` as ``repo_id`` at ``revision``; returns the revision's commit sha."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"no folder {folder} to serve as {repo_type} {repo_id}@{revision}")
        files = _scan(folder)
        digest = hashlib.sha1(f"{repo_type}/{repo_id}@{revision}".encode())
        for rel, f in files.items():
            digest.update(f"{rel}:{f.blob}".encode())
        rev = _Revision(revision, folder, digest.hexdigest(), files)
        with self._lock:
            repo = self.repos.setdefault((repo_type, repo_id), _Repo(repo_id, repo_type))
            repo.gated = repo.gated or gated
            repo.revisions[revision] = rev
            self._lfs.update({f.sha256: f for f in files.values() if f.lfs})
        return rev.sha

    def sha(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> str:
        """The commit sha the server gives ``repo_id`` at ``revision``."""
        return self.repos[(repo_type, repo_id)].revisions[revision].sha

    # ------------------------------------------------------------------ life
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, hf_home: str | os.PathLike | None = None, token: str | None = ACCEPTED) -> dict[str, str]:
        """The environment a client process needs: this endpoint, offline switches off, a token.

        ``hf_home``: a fresh folder per test session, so nothing cached leaks between runs.
        """
        env = {"HF_ENDPOINT": self.url, "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0",
               "TRANSFORMERS_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "1",
               "HF_HUB_ETAG_TIMEOUT": "5", "HF_HUB_DOWNLOAD_TIMEOUT": "10"}
        if hf_home is not None:
            env["HF_HOME"] = str(hf_home)
        if token is not None:
            env["HF_TOKEN"] = token
        return env

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self._cdn.server_address[1]}"

    def start(self) -> "LocalHubServer":
        for name, httpd in (("localhub", self._httpd), ("localhub-cdn", self._cdn)):
            thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, keep: socket.socket | None = None) -> None:
        """Go away: stop listening and close every open connection (a client mid-run sees it);
        ``keep``: one its handler closes itself."""
        if not self._threads:
            return
        for httpd in (self._httpd, self._cdn):
            httpd.shutdown()
            httpd.server_close()
        with self._lock:
            for sock in list(self._sockets - {keep}):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._threads = []

    def __enter__(self) -> "LocalHubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ answers
    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append((method, path, status))
            if self._log is not None:
                with self._log.open("a", encoding="utf-8") as log:
                    log.write(f"{time.strftime('%H:%M:%S')} {status} {method} {path}\n")

    def _repo(self, repo_type: str, parts: list[str]) -> tuple[_Repo | None, list[str]]:
        """The registered repo whose id starts ``parts`` (``org/name`` or ``name``), and the rest."""
        for n in (2, 1):
            repo = self.repos.get((repo_type, "/".join(parts[:n])))
            if repo is not None:
                return repo, parts[n:]
        return None, parts[2:]


class _Error(Exception):
    def __init__(self, status: int, code: str | None, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _entry(rel: str, f: _File, expand: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "file", "oid": f.blob, "size": f.size, "path": rel}
    if f.lfs:
        entry["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": 134}
    if expand:
        entry["lastCommit"] = None
        entry["securityFileStatus"] = None
    return entry


def _dir_entry(rel: str) -> dict[str, Any]:
    return {"type": "directory", "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": 0, "path": rel}


def _handler(hub: LocalHubServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the clients' connection pools expect

        def log_message(self, *args):  # the hub keeps its own log (hub.requests)
            pass

        def setup(self):
            super().setup()
            with hub._lock:
                hub._sockets.add(self.connection)

        def finish(self):
            with hub._lock:
                hub._sockets.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        # -------------------------------------------------------------- dispatch
        def do_HEAD(self):
            self._dispatch(head=True)

        def do_GET(self):
            self._dispatch(head=False)

        def do_POST(self):
            self._dispatch(head=False, post=True)

        def _dispatch(self, head: bool, post: bool = False):
            url = urlsplit(self.path)
            self.query = parse_qs(url.query)
            parts = [unquote(p) for p in url.path.split("/") if p]
            status = 500
            if hub.go_away_at and url.path.startswith(hub.go_away_at):
                # the server dies on this request: no answer, the connection drops, nothing listens after
                hub.go_away_at = None
                hub._record(self.command, self.path, 0)
                self.close_connection = True
                # stopped before this handler returns: the client's retries find nothing listening;
                # this connection then closes cleanly (FIN), not reset
                hub.stop(keep=self.connection)
                return
            try:
                status = self._route(parts, head, post)
            except _Error as err:
                status = err.status
                if err.code is None and err.message.startswith("localhub: no route"):
                    hub.unrouted.append((self.command, self.path))
                self._send_error(err, head)
            except (BrokenPipeError, ConnectionResetError):
                status = 499
            finally:
                hub._record(self.command, self.path, status)

        def _route(self, parts: list[str], head: bool, post: bool) -> int:
            token = self._token()
            if token and token not in (ACCEPTED, NOT_ACCEPTED):  # the hub refuses a bad token everywhere
                raise _Error(401, None, "Invalid credentials in Authorization header")
            if parts == ["api", "whoami-v2"]:
                if not token:
                    raise _Error(401, None, "Invalid credentials in Authorization header")
                return self._json({"type": "user", "name": "localhub-user", "fullname": "TEST SCAFFOLDING",
                                   "orgs": [], "auth": {"type": "access_token",
                                                        "accessToken": {"displayName": "localhub", "role": "read"}}},
                                  head)
            if parts[:1] == ["api"] and len(parts) >= 3 and parts[1] in ("models", "datasets", "spaces"):
                return self._api(parts[1][:-1], parts[2:], head, post)
            if parts == ["api", "agent-harnesses"]:  # huggingface_hub >= 2 asks once a day: none
                return self._json({"standardEnvVars": [], "harnesses": {}}, head)
            if parts[:1] == ["lfs"] and len(parts) == 2:
                f = hub._lfs.get(parts[1])
                if f is None:
                    raise _Error(404, "EntryNotFound", "no such LFS object")
                return self._file(f, head, {})
            repo_type = "model"
            if parts[:1] in (["datasets"], ["spaces"]):
                repo_type, parts = parts[0][:-1], parts[1:]
            if "resolve" in parts:
                i = parts.index("resolve")
                repo = hub.repos.get((repo_type, "/".join(parts[:i])))
                if repo is None:
                    raise self._not_found(repo_type, "/".join(parts[:i]))
                return self._resolve(repo, parts[i + 1:], head)
            raise _Error(404, None, f"localhub: no route for {self.command} {self.path}")

        # -------------------------------------------------------------- /api
        def _api(self, repo_type: str, parts: list[str], head: bool, post: bool) -> int:
            repo, rest = hub._repo(repo_type, parts)
            if repo is None:
                raise self._not_found(repo_type, "/".join(parts[:2]))
            if not rest:
                return self._info(repo, repo.find("main") or next(iter(repo.revisions.values())), head)
            if rest == ["auth-check"]:  # HfApi.auth_check: may this token read the files?
                self._gate(repo)
                return self._json({}, head)
            kind, rev_name, path = rest[0], rest[1] if len(rest) > 1 else "main", "/".join(rest[2:])
            rev = repo.find(rev_name)
            if rev is None:
                raise _Error(404, "RevisionNotFound", f"Invalid rev id: {rev_name}")
            if kind == "revision":
                return self._info(repo, rev, head)
            if kind == "tree":
                return self._tree(rev, path, head)
            if kind == "paths-info" and post:
                return self._paths_info(rev, head)
            raise _Error(404, None, f"localhub: no route for {self.command} {self.path}")

        def _info(self, repo: _Repo, rev: _Revision, head: bool) -> int:
            info: dict[str, Any] = {
                "_id": rev.sha[:24], "id": repo.repo_id, "author": repo.repo_id.split("/")[0], "sha": rev.sha,
                "lastModified": "2026-01-01T00:00:00.000Z", "createdAt": "2026-01-01T00:00:00.000Z",
                "private": False, "gated": "manual" if repo.gated else False, "disabled": False,
                "downloads": 0, "likes": 0, "tags": ["localhub-test-scaffolding"],
                "siblings": [{"rfilename": rel, "size": f.size, "blobId": f.blob,
                              **({"lfs": {"sha256": f.sha256, "size": f.size, "pointerSize": 134}} if f.lfs else {})}
                             for rel, f in rev.files.items()],
                "cardData": {}, "usedStorage": sum(f.size for f in rev.files.values()),
            }
            if repo.repo_type == "model":
                info["modelId"] = repo.repo_id
                if "model_index.json" in rev.files:
                    info["library_name"] = "diffusers"
                    info["config"] = {"diffusers": {"_class_name": json.loads(
                        rev.files["model_index.json"].path.read_text())["_class_name"]}}
            else:
                info["description"] = "TEST SCAFFOLDING: synthetic rows, not the real dataset"
            return self._json(info, head)

        def _tree(self, rev: _Revision, path: str, head: bool) -> int:
            path = path.strip("/")
            recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
            expand = self.query.get("expand", ["false"])[0].lower() in ("1", "true")
            prefix = f"{path}/" if path else ""
            if path and path in rev.files:
                raise _Error(404, "EntryNotFound", f"{path} is a file, not a folder")
            below = {rel: f for rel, f in rev.files.items() if rel.startswith(prefix)}
            if path and not below:
                raise _Error(404, "EntryNotFound", f"{path} does not exist on revision {rev.name}")
            entries, dirs = [], set()
            for rel, f in below.items():
                tail = rel[len(prefix):].split("/")
                for depth in range(1, len(tail)):
                    if recursive or depth == 1:
                        dirs.add(prefix + "/".join(tail[:depth]))
                if recursive or len(tail) == 1:
                    entries.append(_entry(rel, f, expand))
            return self._json([_dir_entry(d) for d in sorted(dirs)] + entries, head)

        def _paths_info(self, rev: _Revision, head: bool) -> int:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            if "json" in (self.headers.get("Content-Type") or ""):
                data = json.loads(body or "{}")
                paths, expand = data.get("paths", []), bool(data.get("expand"))
            else:
                form = parse_qs(body)
                paths, expand = form.get("paths", []), form.get("expand", ["false"])[0].lower() == "true"
            out = []
            for p in ([paths] if isinstance(paths, str) else paths):
                p = p.strip("/")
                if p in rev.files:
                    out.append(_entry(p, rev.files[p], expand))
                elif any(rel.startswith(p + "/") for rel in rev.files) or not p:
                    out.append(_dir_entry(p))
            return self._json(out, head)

        def _token(self) -> str:
            return (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()

        def _gate(self, repo: _Repo) -> None:
            """A gated repo's files: 401 without a token, 403 with one that has not accepted the terms."""
            if not repo.gated:
                return
            token = self._token()
            kind = "dataset" if repo.repo_type == "dataset" else "model"
            if not token:
                raise _Error(401, "GatedRepo", f"Access to {kind} {repo.repo_id} is restricted. You must have "
                             "access to it and be authenticated to access it. Please log in.")
            if token != ACCEPTED:
                raise _Error(403, "GatedRepo", f"Access to {kind} {repo.repo_id} is restricted and you are not in "
                             f"the authorized list. Visit {hub.url}/{'datasets/' if kind == 'dataset' else ''}"
                             f"{repo.repo_id} to ask for access.")

        # -------------------------------------------------------------- /resolve
        def _resolve(self, repo: _Repo, parts: list[str], head: bool) -> int:
            if not parts:
                raise _Error(404, "EntryNotFound", "no file named")
            rev = repo.find(parts[0])
            if rev is None:
                raise _Error(404, "RevisionNotFound", f"Invalid rev id: {parts[0]}")
            rel = "/".join(parts[1:])
            self._gate(repo)
            f = rev.files.get(rel)
            if f is None:
                raise _Error(404, "EntryNotFound", f"{rel} does not exist on revision {rev.name} of {repo.repo_id}")
            headers = {"X-Repo-Commit": rev.sha, "ETag": f'"{f.blob}"'}
            if f.lfs:
                headers.update({"X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(f.size),
                                "Location": f"{hub.cdn_url}/lfs/{f.sha256}"})
                if head:  # the real hub redirects LFS files to its CDN; GET follows it there too
                    return self._send(302, b"", headers, head=True)
            return self._file(f, head, headers)

        def _file(self, f: _File, head: bool, headers: dict[str, str]) -> int:
            data = f.path.read_bytes()
            status, rng = 200, self.headers.get("Range")
            if rng and rng.startswith("bytes="):
                start_s, _, end_s = rng[6:].partition("-")
                start = int(start_s) if start_s else max(0, len(data) - int(end_s))
                end = min(int(end_s), len(data) - 1) if (end_s and start_s) else len(data) - 1
                if start >= len(data):
                    return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                headers = {**headers, "Content-Range": f"bytes {start}-{end}/{len(data)}"}
                data, status = data[start:end + 1], 206
            headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            if hub.cut_downloads > 0 and not head and len(data) > 1:
                hub.cut_downloads -= 1
                # the server goes away mid-transfer: half the promised bytes, then the connection closes
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(data))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return 599
            return self._send(status, data, headers, head)

        # -------------------------------------------------------------- replies
        def _not_found(self, repo_type: str, repo_id: str) -> _Error:
            token = self.headers.get("Authorization")
            kind = {"model": "Model", "dataset": "Dataset"}.get(repo_type, "Space")
            return _Error(404 if token else 401, "RepoNotFound", f"Repository Not Found: {kind} {repo_id} does not exist "
                          "on this local test hub (tests/support/localhub)")

        def _json(self, obj: Any, head: bool) -> int:
            return self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json"}, head)

        def _send_error(self, err: _Error, head: bool) -> None:
            headers = {"Content-Type": "application/json", "X-Error-Message": err.message}
            if err.code:
                headers["X-Error-Code"] = err.code
            self._send(err.status, json.dumps({"error": err.message}).encode(), headers, head)

        def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> int:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", headers.get("X-Linked-Size", str(len(body))) if status == 302
                                 else str(len(body)))
            self.end_headers()
            if not head and body:
                self.wfile.write(body)
            return status

    return Handler


def url_path(repo_id: str, filename: str, revision: str = "main", repo_type: str = "model") -> str:
    """The resolve path of a file, as the clients build it."""
    prefix = "" if repo_type == "model" else f"{repo_type}s/"
    return f"/{prefix}{repo_id}/resolve/{quote(revision, safe='')}/{filename}"
