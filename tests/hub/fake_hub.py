"""A loopback-only stand-in for the Hugging Face Hub's HTTP protocol, for push/pull tests.

It speaks just enough of the protocol for the unchanged ``huggingface_hub`` client (and
transformers / peft on top of it) to create repos, commit files and download them:

- ``POST /api/repos/create``, ``POST /api/validate-yaml``;
- ``POST /api/models/{repo}/preupload/{rev}`` (always ``uploadMode: regular``: no LFS, no Xet);
- ``POST /api/models/{repo}/commit/{rev}`` (NDJSON, base64 file contents);
- ``GET /api/models/{repo}[/revision/{rev}]`` and ``GET /api/models/{repo}/tree/{rev}[/{path}]``;
- ``HEAD``/``GET /{repo}/resolve/{rev}/{path}`` with ``X-Repo-Commit`` and ``ETag``.

Repos live in memory, as a list of commits (each a full ``{path: bytes}`` snapshot) per repo.
The server binds 127.0.0.1 on a free port and stops itself after ``max_seconds``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

_REPO = r"(?P<repo>[^/]+/[^/]+)"
_REV = r"(?P<rev>[^/]+)"


def git_blob_sha1(content: bytes) -> str:
    """The git object id of a file, which the Hub sends as the ETag of regular files."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class FakeRepo:
    """One model repo: commits oldest first, each ``(commit_id, {path: content})``."""

    commits: list[tuple[str, dict[str, bytes]]] = field(default_factory=list)

    def snapshot(self, revision: str) -> tuple[str, dict[str, bytes]] | None:
        """``(commit_id, files)`` for ``main`` or a commit id, or None if unknown."""
        if revision == "main" and self.commits:
            return self.commits[-1]
        return next((commit for commit in self.commits if commit[0] == revision), None)


class FakeHub:
    """In-memory Hub on ``http://127.0.0.1:<port>``; use as a context manager.

    Attributes:
        url: the endpoint to put in ``HF_ENDPOINT``.
        repos: ``{repo_id: FakeRepo}``, readable by tests.
        requests: ``"METHOD /path"`` for every request served, in order.
    """

    def __init__(self, max_seconds: float = 120.0):
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True)
        self._deadline = threading.Timer(max_seconds, self.stop)
        self._deadline.daemon = True

    def __enter__(self) -> FakeHub:
        self._thread.start()
        self._deadline.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        self._deadline.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def create_repo(self, repo_id: str) -> bool:
        """Create an empty repo; False if it already existed."""
        with self._lock:
            if repo_id in self.repos:
                return False
            self.repos[repo_id] = FakeRepo()
            self._commit(repo_id, {})
            return True

    def commit(self, repo_id: str, additions: dict[str, bytes], deletions: list[str]) -> str:
        """Apply one commit on top of ``main``; returns the new commit id."""
        with self._lock:
            files = dict(self.repos[repo_id].commits[-1][1])
            for path in deletions:
                files = {name: data for name, data in files.items() if name != path and not name.startswith(path + "/")}
            return self._commit(repo_id, {**files, **additions})

    def _commit(self, repo_id: str, files: dict[str, bytes]) -> str:
        repo = self.repos[repo_id]
        commit_id = hashlib.sha1(f"{repo_id}:{len(repo.commits)}".encode()).hexdigest()
        repo.commits.append((commit_id, files))
        return commit_id


def _handler_for(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(_HubHandler):
        pass

    Handler.hub = hub
    return Handler


class _HubHandler(BaseHTTPRequestHandler):
    """Serves one request: ``_dispatch`` matches the path against the routes below."""

    hub: FakeHub
    timeout = 10  # seconds a client may stall mid-request
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        path = urlsplit(self.path).path
        self.hub.requests.append(f"{method} {path}")
        routes: list[tuple[str, str, Callable[..., None]]] = [
            ("POST", r"/api/repos/create", self._create_repo),
            ("POST", r"/api/validate-yaml", self._validate_yaml),
            ("POST", rf"/api/models/{_REPO}/preupload/{_REV}", self._preupload),
            ("POST", rf"/api/models/{_REPO}/commit/{_REV}", self._commit),
            ("GET", rf"/api/models/{_REPO}(?:/revision/{_REV})?", self._model_info),
            ("GET", rf"/api/models/{_REPO}/tree/{_REV}(?:/(?P<prefix>.+))?", self._tree),
            ("GET", rf"/{_REPO}/resolve/{_REV}/(?P<path>.+)", self._resolve),
            ("HEAD", rf"/{_REPO}/resolve/{_REV}/(?P<path>.+)", self._resolve),
        ]
        for route_method, pattern, handler in routes:
            match = re.fullmatch(pattern, path)
            if route_method == method and match:
                handler(**{key: unquote(value) for key, value in match.groupdict().items() if value is not None})
                return
        self._read_body()
        self._send_json({"error": f"fake hub: no route for {method} {path}"}, status=404)

    # -- writes ---------------------------------------------------------------------------

    def _create_repo(self) -> None:
        body = self._read_json()
        repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
        created = self.hub.create_repo(repo_id)
        status = 200 if created else 409
        self._send_json({"url": f"{self.hub.url}/{repo_id}", "name": repo_id}, status=status)

    def _validate_yaml(self) -> None:
        self._read_body()
        self._send_json({"errors": [], "warnings": []})

    def _preupload(self, repo: str, rev: str) -> None:
        body = self._read_json()
        if self._snapshot_or_404(repo, rev) is None:
            return
        files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in body["files"]]
        self._send_json({"files": files})

    def _commit(self, repo: str, rev: str) -> None:
        lines = [json.loads(line) for line in self._read_body().splitlines() if line.strip()]
        if self._snapshot_or_404(repo, rev) is None:
            return
        additions: dict[str, bytes] = {}
        deletions: list[str] = []
        for line in lines:
            key, value = line["key"], line["value"]
            if key == "file":
                additions[value["path"]] = base64.b64decode(value["content"])
            elif key in ("deletedFile", "deletedFolder"):
                deletions.append(value["path"])
            elif key != "header":
                self._send_json({"error": f"fake hub: unsupported commit operation {key!r}"}, status=400)
                return
        commit_id = self.hub.commit(repo, additions, deletions)
        self._send_json({"commitUrl": f"{self.hub.url}/{repo}/commit/{commit_id}", "commitOid": commit_id})

    # -- reads ----------------------------------------------------------------------------

    def _model_info(self, repo: str, rev: str = "main") -> None:
        snapshot = self._snapshot_or_404(repo, rev)
        if snapshot is not None:
            commit_id, files = snapshot
            siblings = [{"rfilename": path, "size": len(data)} for path, data in sorted(files.items())]
            self._send_json({"id": repo, "sha": commit_id, "private": False, "siblings": siblings})

    def _tree(self, repo: str, rev: str, prefix: str = "") -> None:
        snapshot = self._snapshot_or_404(repo, rev)
        if snapshot is not None:
            _, files = snapshot
            entries = [
                {"type": "file", "path": path, "size": len(data), "oid": git_blob_sha1(data)}
                for path, data in sorted(files.items())
                if not prefix or path.startswith(prefix.rstrip("/") + "/")
            ]
            self._send_json(entries)

    def _resolve(self, repo: str, rev: str, path: str) -> None:
        snapshot = self._snapshot_or_404(repo, rev)
        if snapshot is None:
            return
        commit_id, files = snapshot
        if path not in files:
            self._send_error(404, "EntryNotFound", f"{path} not in {repo}@{rev}", {"X-Repo-Commit": commit_id})
            return
        data = files[path]
        headers = {"X-Repo-Commit": commit_id, "ETag": f'"{git_blob_sha1(data)}"'}
        self._send(200, data, "application/octet-stream", headers)

    # -- helpers --------------------------------------------------------------------------

    def _snapshot_or_404(self, repo: str, rev: str) -> tuple[str, dict[str, bytes]] | None:
        if repo not in self.hub.repos:
            self._send_error(404, "RepoNotFound", f"Repository {repo} not found")
            return None
        snapshot = self.hub.repos[repo].snapshot(rev)
        if snapshot is None:
            self._send_error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return snapshot

    def _read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _read_json(self) -> dict:
        return json.loads(self._read_body() or b"{}")

    def _send_json(self, payload: object, status: int = 200) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send_error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        error_headers = {"X-Error-Code": code, "X-Error-Message": message, **(headers or {})}
        self._send(status, body, "application/json", error_headers)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
