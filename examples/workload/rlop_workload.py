"""A reference RL workload for rlop: one program, one role per pool. A demo, not a training framework.

    python rlop_workload.py controller|rollout|reward|sandbox|trainer

Roles find each other through the variables rlop injects (RLOP_ROLLOUT_URL, RLOP_REWARD_URL,
RLOP_SANDBOX_URL, RLOP_TRAINER_ADDR, RLOP_WEIGHTS_DIR, ...), serve HTTP on RLOP_PORT (8000; every role
GET /healthz and GET /ready, 503 while stopping) and export Prometheus metrics on RLOP_METRICS_PORT (9400)
with the labels namespace, rljob and pool, under the names the example RLJob scales on:

- rollout:    a tiny real model (vocabulary 64, dimension 16: tensors embed and lm_head, version v made from
              the seed v; it starts at the base weights, served as weight version "default", its HTTP server
              up after RLOP_LOAD_SECONDS (2) of simulated model loading, as an engine's is) behind the subset
              of SGLang's HTTP API that RL frameworks and sglang-router use, as SGLang v0.5.23 serves it:
              POST /generate (greedy decoding, plus a simulated decode latency; the reply also carries the RL
              sample: prompt, completion, expected, right, version), POST /update_weights_from_disk
              {"model_path", "weight_version"}, POST /flush_cache, GET /health, /health_generate,
              /model_info (/get_model_info), /server_info (/get_server_info), /v1/loads; with
              RLOP_SGLANG_API=legacy as older and slime-patched builds: /get_weight_version, /get_load and
              no /model_info, /v1/loads. With RLOP_GROUP_SIZE > 1 one replica is a group of pods, as
              SGLang's --nnodes: rank 0 (RLOP_GROUP_RANK) serves once every rank has connected to
              RLOP_GROUP_LEADER_ADDRESS, the others serve only GET /health, and a rank lost ends the
              rest (exit 1). Metrics: vllm:num_requests_waiting, vllm:num_requests_running,
              rlop_rollout_weight_version, rlop_rollout_weight_updates_total{result: ok, failed}. Stopped
              (SIGTERM), it refuses new generations (503, an infrastructure failure) and finishes those in
              flight (up to RLOP_STOP_SECONDS, 20), as the sandbox does.
- reward:     scores completions (rlop_reward_pending)
- sandbox:    really executes the submitted Python snippets in a resource-limited subprocess and checks
              their output (rlop_sandbox_queue_depth, rlop_sandbox_verifications_total). Drained (rlop's
              mark in RLOP_DRAIN_FILE) or stopped (SIGTERM), it turns NotReady, refuses new checks with a 503
              marked as an infrastructure failure, finishes the ones in flight, and answers any it must cut
              short the same way: a verdict is only ever a verdict.
- trainer:    consumes batches (POST /batch), exports step time and staleness (rlop_trainer_step_seconds,
              rlop_trainer_staleness: policy versions between generation and training). With
              RLOP_WEIGHTS_DIR, rank 0 (RLOP_TRAINER_RANK) publishes the next policy version v after a step,
              at most every RLOP_PUBLISH_SECONDS (10), as the checkpoint <dir>/<v>/model.safetensors (written
              aside and renamed into place; the newest 8 kept; a restarted trainer resumes from the newest).
              rlop_policy_version: the newest published (rank 0), the newest on disk (other ranks), 0 without
              RLOP_WEIGHTS_DIR. With RLOP_CHECKPOINT_DIR it checkpoints its step (rlop_trainer_step; after
              every step, on rlop's checkpoint-now mark, on SIGTERM) and a restarted gang resumes from it;
              with RLOP_TRAIN_STEPS every rank exits 0 at that step (GET /state: step, resumed_from, restart).
- controller: drives the asynchronous loop prompts -> rollout -> reward + sandbox -> trainer with a bounded
              staleness; POST /load {"prompts_per_s": x, "checks_per_prompt": k} changes the load. A check
              or a generation that fails for infrastructure (a 503, a reset connection) is retried, never
              scored as wrong (rlop_controller_checks_total{outcome}: scored, retried, lost, misscored against
              the truth; rlop_controller_generations_total{outcome}: served, retried, lost, stale: served with
              weights more than RLOP_ROLLOUT_MAX_STALENESS (1) versions behind rlop_controller_policy_version,
              the newest the trainer reported).

With RLOP_SIMULATED=1 (rlop's demo on simulated nodes) one process stands for a whole pool and serves at
the rate of the replicas rlop runs: POST /sim/replicas {"n": k}.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy
from numpy.typing import NDArray
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

ROLE = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("RLOP_POOL", "controller")
LABELS = {
    "namespace": os.environ.get("RLOP_NAMESPACE", "default"),
    "rljob": os.environ.get("RLOP_JOB", "local"),
    "pool": os.environ.get("RLOP_POOL", ROLE),
}
PORT = int(os.environ.get("RLOP_PORT", "8000"))
METRICS_PORT = int(os.environ.get("RLOP_METRICS_PORT", "9400"))
SIMULATED = os.environ.get("RLOP_SIMULATED") == "1"
SLOTS_PER_REPLICA = int(os.environ.get("RLOP_SLOTS", "4"))


def gauge(name: str, doc: str) -> Gauge:
    return Gauge(name, doc, list(LABELS)).labels(**LABELS)


class Unavailable(Exception):
    """Not a verdict: the replica cannot do this now (draining, stopping); try another one."""


class Rejected(Exception):
    """The request itself is wrong (a 400 whose reply is `body`): another attempt would fail the same way."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body.get("message"))
        self.body = body


def post(url: str, body: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")  # type: ignore[no-any-return]


def _body(e: urllib.error.HTTPError) -> str:
    """The start of an HTTP error's body (what the server said), for the log."""
    with contextlib.suppress(OSError):
        return e.read(300).decode(errors="replace")
    return ""


def infrastructure(e: Exception) -> bool:
    """A failure of the way to a replica, not of the request: worth another attempt, on whichever replica
    the router or Service picks. Every HTTP error is one but a refusal of the request itself (400, 422):
    sglang-router 0.3.2 answers a 500 call_upstream_request_error when the worker it picked is gone (0.2.x:
    "Request failed: ...") and a 503 no_available_workers when none is left, and a 404 (seen on kind, source
    unknown) is no refusal of the prompt; a refused, reset or cut connection, a timeout are too."""
    if isinstance(e, urllib.error.HTTPError):
        return e.code not in (400, 422)
    return isinstance(e, urllib.error.URLError | ConnectionError | TimeoutError | http.client.HTTPException)


class Slots:
    """A pool of service slots: replicas x slots per replica (replicas is 1 in a real pod)."""

    def __init__(self, waiting: Gauge, running: Gauge | None = None) -> None:
        self.replicas, self.busy, self.cond = 1, 0, threading.Condition()
        self.waiting, self.running, self.queued = waiting, running, 0

    def resize(self, replicas: int) -> None:
        with self.cond:
            self.replicas = max(0, replicas)
            self.cond.notify_all()

    def __enter__(self) -> None:
        with self.cond:
            self.queued += 1
            self.waiting.set(self.queued)
            while self.busy >= self.replicas * SLOTS_PER_REPLICA:
                self.cond.wait()
            self.queued -= 1
            self.busy += 1
            self.waiting.set(self.queued)
            if self.running is not None:
                self.running.set(self.busy)

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.busy -= 1
            if self.running is not None:
                self.running.set(self.busy)
            self.cond.notify()


class Graceful:
    """Stops gracefully: drained or stopped (SIGTERM), it turns NotReady and takes no new work (Unavailable),
    lets the work in flight finish for up to RLOP_STOP_SECONDS, then sets `aborted` (the work still in flight
    answers Unavailable, never a made-up result) and exits."""

    def __init__(self) -> None:
        self.stop_seconds = float(os.environ.get("RLOP_STOP_SECONDS", "20"))  # below terminationGracePeriod
        self.draining, self.aborted = threading.Event(), threading.Event()
        self.inflight, self.lock = 0, threading.Lock()

    def drain(self) -> None:
        self.draining.set()

    def ready(self) -> bool:
        return not self.draining.is_set()

    def stop(self, exit_: Callable[[int], object] = os._exit) -> None:
        """SIGTERM: drain, wait for the work in flight (up to stop_seconds), cut the rest short, exit."""
        self.drain()
        deadline = time.monotonic() + self.stop_seconds
        while self.inflight and time.monotonic() < deadline:
            time.sleep(0.1)
        self.aborted.set()
        while self.inflight and time.monotonic() < deadline + 2:  # their 503s go out
            time.sleep(0.05)
        exit_(0)

    @contextlib.contextmanager
    def admitted(self, what: str, refused: Counter | None = None) -> Iterator[None]:
        """One piece of work in flight; Unavailable (counted in `refused`) once draining."""
        with self.lock:
            if self.draining.is_set():
                if refused is not None:
                    refused.inc()
                raise Unavailable(f"draining: this replica takes no new {what}")
            self.inflight += 1
        try:
            yield
        finally:
            with self.lock:
                self.inflight -= 1


# ---------------------------------------------------------------- a replica across several nodes


class Rendezvous:
    """SGLang's multi-node start (--nnodes N --node-rank i --dist-init-addr <leader>:<port>) in miniature:
    rank 0 listens at the leader's address and returns from join() only once every other rank has connected
    (a real TCP rendezvous, not a sleep); the ranks then stay connected with a heartbeat, and a lost peer
    (its process killed, its node gone: no beat for `patience` seconds) ends this process with exit code 1,
    as a real engine whose collective broke is aborted. Set by RLOP_GROUP_SIZE, RLOP_GROUP_RANK and
    RLOP_GROUP_LEADER_ADDRESS."""

    BEAT = b"."

    def __init__(self, size: int, rank: int, address: str, patience: float = 5.0,
                 exit_: Callable[[int], object] = os._exit) -> None:  # fmt: skip
        if not 0 <= rank < size:
            raise SystemExit(f"RLOP_GROUP_RANK={rank}: not in [0, {size})")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise SystemExit(f"RLOP_GROUP_LEADER_ADDRESS={address!r}: host:port")
        self.size, self.rank, self.addr, self.patience, self.exit = size, rank, (host, int(port)), patience, exit_
        self.peers: list[socket.socket] = []

    def join(self, timeout: float = 600.0) -> None:
        """Block until the whole group is connected (at most `timeout` seconds); then watch every peer."""
        deadline = time.monotonic() + timeout
        if self.rank == 0:
            self.gather(deadline)
        else:
            while True:
                with contextlib.suppress(OSError):  # the leader not up yet, or gone while we waited: again
                    conn = socket.create_connection(self.addr, timeout=self.patience)
                    conn.sendall(f"{self.rank}\n".encode())
                    conn.settimeout(max(0.1, deadline - time.monotonic()))  # the others may come much later
                    if conn.recv(3) == b"ok\n":
                        break
                    conn.close()
                if time.monotonic() > deadline:
                    raise SystemExit(f"rank {self.rank}: no group at {self.addr[0]}:{self.addr[1]}")
                time.sleep(0.2)
            self.peers = [conn]
        for conn in self.peers:
            threading.Thread(target=self.watch, args=(conn,), daemon=True).start()

    def gather(self, deadline: float) -> None:
        """Rank 0: accept one connection per other rank; anything else (a probe, a stranger) is turned away; a
        rank that connects again (its process restarted before the group was whole) replaces its old one."""
        ranks: dict[int, socket.socket] = {}
        with socket.create_server(("", self.addr[1])) as listener:
            while len(ranks) < self.size - 1:
                listener.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    raise SystemExit(f"rank 0: {len(ranks) + 1} of {self.size} ranks after the timeout") from None
                conn.settimeout(self.patience)
                try:
                    said = conn.recv(16).decode(errors="replace").strip()
                except OSError:
                    said = ""
                rank = int(said) if said.isdigit() else -1
                if not 0 < rank < self.size:
                    conn.close()
                    continue
                if rank in ranks:
                    ranks[rank].close()
                ranks[rank] = conn
            for rank, conn in list(ranks.items()):
                try:
                    conn.sendall(b"ok\n")
                except OSError:
                    raise SystemExit(f"rank 0: rank {rank} left before the group was whole") from None
        self.peers = list(ranks.values())

    def watch(self, conn: socket.socket) -> None:
        """Beat every second; a peer silent for `patience` seconds, or gone, ends this process."""
        conn.settimeout(self.patience)
        threading.Thread(target=self.beat, args=(conn,), daemon=True).start()
        with contextlib.suppress(OSError):
            while conn.recv(64):
                pass
        print(f"rank {self.rank}: lost a rank of the group: exiting", file=sys.stderr, flush=True)
        self.exit(1)

    def beat(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn.sendall(self.BEAT)
                time.sleep(1)


def group() -> Rendezvous | None:
    """This pod's group, from rlop's variables (None: a replica of one pod)."""
    size = int(os.environ.get("RLOP_GROUP_SIZE", "1") or 1)
    if size <= 1:
        return None
    return Rendezvous(size, int(os.environ.get("RLOP_GROUP_RANK", "0") or 0),
                      os.environ.get("RLOP_GROUP_LEADER_ADDRESS", ""))  # fmt: skip


# ---------------------------------------------------------------- the rollout's tiny model

VOCAB, DIM = 64, 16
SHAPES = {"embed": (VOCAB, DIM), "lm_head": (DIM, VOCAB)}
MODEL_PATH = "rlop-tiny"  # as SGLang's, the launch-time name whatever weights are loaded: the router keys workers by it
KEEP_CHECKPOINTS = 8  # the trainer's newest checkpoints kept on disk
STATE_FILE = "trainer-state.json"  # the trainer's checkpoint in RLOP_CHECKPOINT_DIR (its step)
Tensors = dict[str, NDArray[np.float32]]


def make_weights(version: int) -> Tensors:
    """Version `version` of the weights: the same anywhere, made from the seed `version`."""
    rng = np.random.default_rng(version)
    return {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in SHAPES.items()}


def save_weights(path_dir: str, tensors: Tensors) -> None:
    """`path_dir`/model.safetensors (the directory made if need be)."""
    os.makedirs(path_dir, exist_ok=True)
    safetensors.numpy.save_file(tensors, os.path.join(path_dir, "model.safetensors"))


def load_weights(path: str) -> Tensors:
    """The weights in `path` (a directory holding model.safetensors, or the file itself); ValueError unless
    they are this model's: its tensor names, shapes and dtype."""
    file = os.path.join(path, "model.safetensors") if os.path.isdir(path) else path
    try:
        tensors = safetensors.numpy.load_file(file)
    except (OSError, safetensors.SafetensorError) as e:
        raise ValueError(f"cannot read {file}: {e}") from e
    if set(tensors) != set(SHAPES):
        raise ValueError(f"{file}: tensors {sorted(tensors)}, expected {sorted(SHAPES)}")
    for name, shape in SHAPES.items():
        got = tensors[name]
        if got.shape != shape or got.dtype != np.float32:
            raise ValueError(f"{file}: {name} is {got.dtype}{list(got.shape)}, expected float32{list(shape)}")
    return tensors


def encode(text: str) -> list[int]:
    """The tokenizer: a token per byte, the byte mod VOCAB."""
    return [b % VOCAB for b in text.encode()]


def decode(ids: list[int]) -> str:
    return "".join(chr(32 + i) for i in ids)  # printable: ' ' (0) to '_' (63)


def greedy(weights: Tensors, ids: list[int], n: int) -> list[int]:
    """`n` tokens after `ids`, each the argmax of the logits embed[last token] @ lm_head."""
    out, last = [], ids[-1] if ids else 0
    for _ in range(n):
        last = int(np.argmax(weights["embed"][last] @ weights["lm_head"]))
        out.append(last)
    return out


def checkpoints(weights_dir: str) -> list[int]:
    """The versions published in `weights_dir` (its numeric directories), oldest first."""
    try:
        names = os.listdir(weights_dir)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit() and os.path.isdir(os.path.join(weights_dir, n)))


def publish(weights_dir: str, version: int) -> None:
    """Version `version` as <weights_dir>/<version>, atomically (written aside, then renamed into place: a
    reader never sees half a checkpoint); only the newest KEEP_CHECKPOINTS stay."""
    tmp = os.path.join(weights_dir, f".tmp-{version}-{os.getpid()}")
    try:
        save_weights(tmp, make_weights(version))
        os.rename(tmp, os.path.join(weights_dir, str(version)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # left only when the rename failed
    for old in checkpoints(weights_dir)[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(os.path.join(weights_dir, str(old)), ignore_errors=True)


# ---------------------------------------------------------------- roles


def version_number(name: str) -> int:
    """A served weight version as a number for this workload's staleness counts: the trainer's versions are
    named by their decimals; anything else (SGLang's "default": no version loaded yet) is -1."""
    return int(name) if name.isascii() and name.isdigit() and str(int(name)) == name else -1


class Rollout(Graceful):
    """The tiny model behind SGLang's HTTP subset. Weights are swapped under a lock: a generation finishes on
    the weights it started with, and its reply names their version.

    By default it answers as SGLang v0.5.23 does: the weight version a string, "default" until a load names
    one; read from GET /model_info (weight_version) and from /generate's meta_info; GET /get_weight_version
    and GET /get_load gone (404), the load at GET /v1/loads; a load from disk moves model_path and
    served_model_name to the loaded path. With RLOP_SGLANG_API=legacy it answers as older and slime-patched
    builds: GET /get_weight_version, GET /get_load (num_reqs counts the waiting requests too), GET
    /get_model_info, no /model_info and no /v1/loads."""

    def __init__(self, api: str | None = None) -> None:
        super().__init__()
        api = api or os.environ.get("RLOP_SGLANG_API", "current")
        if api not in ("current", "legacy"):
            raise SystemExit(f"RLOP_SGLANG_API={api!r}: current or legacy")
        self.api = api
        self.slots = Slots(gauge("vllm:num_requests_waiting", "Requests waiting for a slot"),
                           gauge("vllm:num_requests_running", "Requests being generated"))  # fmt: skip
        self.version_gauge = gauge("rlop_rollout_weight_version", "Version of the weights served (-1: none)")
        self.updates = Counter("rlop_rollout_weight_updates", "Weight updates by result", [*LABELS, "result"])
        self.swap = threading.Lock()
        self.weights, self.version, self.model_path = make_weights(0), "default", MODEL_PATH
        self.version_gauge.set(-1)

    @property
    def routes(self) -> dict[str, str]:
        common = {"POST /generate": "generate", "POST /update_weights_from_disk": "update_weights_from_disk",
                  "POST /flush_cache": "flush_cache", "GET /health": "health",
                  "GET /health_generate": "health_generate", "GET /get_model_info": "model_info",
                  "GET /get_server_info": "server_info"}  # fmt: skip
        if self.api == "legacy":
            return common | {"GET /get_weight_version": "get_weight_version", "GET /get_load": "get_load"}
        return common | {"GET /model_info": "model_info", "GET /server_info": "server_info",
                         "GET /v1/loads": "v1_loads"}  # fmt: skip

    def model(self) -> tuple[Tensors, str]:
        with self.swap:
            return self.weights, self.version

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        """Greedy decoding of body["text"] (or its "input_ids"), sampling_params.max_new_tokens (8) tokens;
        with the RL sample's fields: a code completion right 70 % of the time."""
        try:  # one prompt (no batch)
            given = body.get("input_ids")
            ids = [int(i) % VOCAB for i in given] if given else encode(body.get("text") or "")
            n = int((body.get("sampling_params") or {}).get("max_new_tokens", 8))
        except (AttributeError, TypeError, ValueError) as e:
            raise Rejected({"error": f"not a prompt: {e}"}) from e
        with self.admitted("generations"), self.slots:
            weights, version = self.model()
            out = greedy(weights, ids, n)
            if self.aborted.wait(random.uniform(0.3, 0.7)):  # simulated decoding
                raise Unavailable("stopped mid-generation")
        meta = {"id": uuid.uuid4().hex, "prompt_tokens": len(ids), "completion_tokens": len(out),
                "weight_version": version, "finish_reason": {"type": "length"}}  # fmt: skip
        a, b = random.randint(1, 99), random.randint(1, 99)
        right = random.random() < 0.7  # the policy is right 70 % of the time
        code = f"print({a} + {b})" if right else f"print({a} - {b})"
        sample = {"prompt": body.get("text"), "completion": code, "expected": str(a + b), "right": right}
        return {"text": decode(out), "meta_info": meta} | sample | {"version": version_number(version)}

    def update_weights_from_disk(self, body: dict[str, Any]) -> dict[str, Any]:
        """Load and check body["model_path"], then serve it, as body["weight_version"] when given (a string,
        as SGLang's UpdateWeightFromDiskReqInput.weight_version: Optional[str]); on failure (Rejected, a 400
        with success false) the weights and version served stay."""
        path, version = body.get("model_path"), body.get("weight_version")
        try:
            if not isinstance(path, str) or not path:
                raise ValueError("model_path: a path is required")
            if version is not None and not isinstance(version, str):
                raise ValueError(f"weight_version {version!r}: a string")
            weights = load_weights(path)
        except ValueError as e:
            self.updates.labels(**LABELS, result="failed").inc()
            raise Rejected({"success": False, "message": str(e), "num_paused_requests": 0}) from e
        with self.swap:
            self.weights = weights
            self.model_path = path  # SGLang's _update_model_path_info: model_path and served_model_name move
            message = "Succeeded to update model weights."
            if version is not None:
                self.version = version
                message += f" Weight version updated to {version}."
            self.version_gauge.set(version_number(self.version))
        self.updates.labels(**LABELS, result="ok").inc()
        return {"success": True, "message": message, "num_paused_requests": 0}

    def flush_cache(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"success": True}  # no cache to flush

    def health(self) -> dict[str, Any]:
        if self.draining.is_set():
            raise Unavailable("stopping")
        return {}

    def health_generate(self) -> dict[str, Any]:
        greedy(self.model()[0], [0], 1)  # one real forward pass
        return self.health()

    def model_info(self) -> dict[str, Any]:
        with self.swap:
            path = self.model_path if self.api == "current" else MODEL_PATH
            info = {"model_path": path, "tokenizer_path": None, "is_generation": True}
            if self.api == "current":
                info |= {"served_model_name": path, "weight_version": self.version}
            return info

    def server_info(self) -> dict[str, Any]:
        return {"model_path": MODEL_PATH, "dp_size": 1, "version": "rlop-workload"}

    def get_weight_version(self) -> dict[str, Any]:
        return {"weight_version": self.model()[1]}

    def get_load(self) -> list[dict[str, Any]]:
        with self.slots.cond:
            return [{"dp_rank": 0, "num_reqs": self.slots.busy + self.slots.queued,
                     "num_waiting_reqs": self.slots.queued, "num_tokens": 0}]  # fmt: skip

    def v1_loads(self) -> dict[str, Any]:
        with self.slots.cond:
            load = {"dp_rank": 0, "num_running_reqs": self.slots.busy, "num_waiting_reqs": self.slots.queued}
        return {"timestamp": time.time(), "version": "rlop-workload", "accelerator": None, "num_accelerators": 0,
                "loads": [load]}  # fmt: skip


class Reward:
    def __init__(self) -> None:
        self.slots = Slots(gauge("rlop_reward_pending", "Completions waiting to be scored"))

    def score(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.slots:
            time.sleep(random.uniform(0.05, 0.15))  # simulated reward model
        return {"score": min(1.0, len(body.get("completion", "")) / 20)}


def run_snippet(code: str, timeout: float = 5.0) -> tuple[bool, str]:
    """Run untrusted Python in a child process: CPU, memory, file-size and process limits, no env, tmp cwd."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (2, 2))
        resource.setrlimit(resource.RLIMIT_AS, (256 * 2**20, 256 * 2**20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20))
        resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
        os.setsid()

    with tempfile.TemporaryDirectory() as tmp:
        try:
            out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                                 timeout=timeout, cwd=tmp, env={}, preexec_fn=limits)  # fmt: skip
        except subprocess.TimeoutExpired:
            return False, "timeout"
    return out.returncode == 0, out.stdout.strip()


class Sandbox(Graceful):
    """Verifies code; stops gracefully: drained or stopped, no new check, the ones in flight finished (or,
    past the stop deadline, answered as infrastructure failures), never a made-up verdict."""

    def __init__(self, drain_file: str = os.environ.get("RLOP_DRAIN_FILE", "")) -> None:
        super().__init__()
        self.slots = Slots(gauge("rlop_sandbox_queue_depth", "Verifications waiting for a slot"))
        self.results = Counter("rlop_sandbox_verifications", "Verifications run", [*LABELS, "result"])
        self.draining_gauge = gauge("rlop_sandbox_draining", "1 once the replica stops taking checks")
        self.check_seconds = float(os.environ.get("RLOP_CHECK_SECONDS", "0.5"))  # a test suite's length
        self.drain_file = drain_file
        threading.Thread(target=self.watch_drain, daemon=True).start()

    def watch_drain(self) -> None:
        """rlop's drain mark: the downward API file turns non-empty (the kubelet updates it in place)."""
        while self.drain_file and not self.draining.is_set():
            with contextlib.suppress(OSError), open(self.drain_file) as f:
                if f.read().strip():
                    self.drain()
            time.sleep(0.5)

    def drain(self) -> None:
        super().drain()
        self.draining_gauge.set(1)

    def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.admitted("checks", self.results.labels(**LABELS, result="refused")):
            with self.slots:
                started = time.monotonic()
                ok, stdout = run_snippet(body["code"])
                self.aborted.wait(max(0.0, self.check_seconds - (time.monotonic() - started)))
            if self.aborted.is_set():
                self.results.labels(**LABELS, result="aborted").inc()
                raise Unavailable("stopped mid-check: not a verdict")
        passed = ok and stdout == body.get("expected")
        self.results.labels(**LABELS, result="pass" if passed else "fail").inc()
        return {"passed": passed, "stdout": stdout[:200]}


def read_state(checkpoint_dir: str) -> dict[str, Any]:
    """The trainer's last checkpoint in `checkpoint_dir` ({} if none)."""
    try:
        with open(os.path.join(checkpoint_dir, STATE_FILE)) as f:
            return dict(json.load(f))
    except (OSError, ValueError):
        return {}


def write_state(checkpoint_dir: str, state: dict[str, Any]) -> None:
    """Atomically (written aside, then renamed into place): a crash mid-write leaves the previous one."""
    tmp = os.path.join(checkpoint_dir, f".{STATE_FILE}.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(checkpoint_dir, STATE_FILE))


class Trainer:
    """Optimizer steps on the controller's batches (or, with RLOP_STEP_SECONDS, on its own clock). With a
    weights directory, rank 0 publishes its starting weights as version 0 (none on disk yet), then the next
    version after a step, RLOP_PUBLISH_SECONDS after the last at the earliest (at once after version 0),
    resuming from the newest on disk; rlop_policy_version
    is the newest published (the other ranks read the directory when scraped; 0 without a directory).

    A gang that survives failure: with RLOP_CHECKPOINT_DIR, rank 0 checkpoints its step after every step, on
    rlop's checkpoint-now mark (RLOP_CHECKPOINT_NOW_FILE: a drain began on a node of the gang) and when
    stopped (SIGTERM, then exit 143); every rank resumes from it, so a restarted gang (RLOP_RESTART_COUNT)
    goes on where it was. With RLOP_TRAIN_STEPS, every rank exits 0 once the checkpoint reaches it: done."""

    def __init__(self, weights_dir: str = os.environ.get("RLOP_WEIGHTS_DIR", ""),
                 rank: int = int(os.environ.get("RLOP_TRAINER_RANK", "0") or 0),
                 checkpoint_dir: str = os.environ.get("RLOP_CHECKPOINT_DIR", ""),
                 steps: int = int(os.environ.get("RLOP_TRAIN_STEPS", "0") or 0),
                 exit_: Callable[[int], object] = os._exit) -> None:  # fmt: skip
        self.step_seconds = Histogram("rlop_trainer_step_seconds", "Time of one optimizer step", list(LABELS))
        self.staleness = gauge("rlop_trainer_staleness", "Policy versions between generation and training")
        self.steps = Counter("rlop_trainer_steps", "Optimizer steps", list(LABELS))
        self.saved = Counter("rlop_trainer_checkpoints", "Checkpoints written, by why", [*LABELS, "why"])
        self.lock, self.exit = threading.Lock(), exit_
        self.weights_dir, self.rank, self.checkpoint_dir, self.total = weights_dir, rank, checkpoint_dir, steps
        self.restart = int(os.environ.get("RLOP_RESTART_COUNT", "0") or 0)
        self.version = self.resumed_from = int(read_state(checkpoint_dir).get("step", 0)) if checkpoint_dir else 0
        gauge("rlop_trainer_step", "The optimizer step, resumed from the checkpoint").set_function(lambda: self.version)
        self.publish_seconds = float(os.environ.get("RLOP_PUBLISH_SECONDS", "10"))
        if rank == 0 and weights_dir and not checkpoints(weights_dir):  # its starting weights, as slime syncs
            with contextlib.suppress(OSError):  # the engines before its first step (a full volume: none)
                publish(weights_dir, 0)
        self.published = max(checkpoints(weights_dir), default=0) if weights_dir else 0
        self.published_at = time.monotonic() if self.published else -math.inf  # v0 (or none): the next at once
        policy = gauge("rlop_policy_version", "Newest policy version published to the weights directory")
        if rank == 0:
            policy.set_function(lambda: self.published)
        else:
            policy.set_function(lambda: max(checkpoints(weights_dir), default=0))
        self.finish_if_done()
        threading.Thread(target=self.follow, daemon=True).start()
        if rank == 0 and (every := float(os.environ.get("RLOP_STEP_SECONDS", "0") or 0)) > 0:
            threading.Thread(target=self.tick, args=(every,), daemon=True).start()

    def batch(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:  # one step at a time
            started = time.monotonic()
            time.sleep(random.uniform(0.5, 1.0))  # simulated forward/backward/all-reduce
            self.version += 1
            self.staleness.set(self.published - min((s.get("version", 0) for s in body["samples"]),
                                                    default=self.published))  # fmt: skip
            self.step_seconds.labels(**LABELS).observe(time.monotonic() - started)
            self.steps.labels(**LABELS).inc()
            self.maybe_publish()
            self.checkpoint("step")
            self.finish_if_done()
            return {"version": self.version, "policy_version": self.published}

    def state(self) -> dict[str, Any]:
        return {"step": self.version, "resumed_from": self.resumed_from, "restart": self.restart, "rank": self.rank}

    def checkpoint(self, why: str) -> None:
        """Rank 0 writes its step (the other ranks hold the same state in this demo)."""
        if self.rank != 0 or not self.checkpoint_dir:
            return
        with contextlib.suppress(OSError):  # a full volume: the previous checkpoint stands
            write_state(self.checkpoint_dir, {"step": self.version, "policy_version": self.published})
            self.saved.labels(**LABELS, why=why).inc()

    def finish_if_done(self) -> None:
        if self.total and self.version >= self.total:
            self.exit(0)

    def follow(self) -> None:
        """Every second: checkpoint on a new checkpoint-now mark; a rank other than 0 follows rank 0's
        checkpoint (and is done with it)."""
        mark_file, seen = os.environ.get("RLOP_CHECKPOINT_NOW_FILE", ""), ""
        while True:
            time.sleep(1)
            with contextlib.suppress(OSError), open(mark_file or os.devnull) as f:
                mark = f.read().strip()
                if mark and mark != seen:
                    self.checkpoint("requested")
                seen = mark
            if self.rank != 0 and self.checkpoint_dir:
                self.version = max(self.version, int(read_state(self.checkpoint_dir).get("step", 0)))
                self.finish_if_done()

    def tick(self, every: float) -> None:
        while True:
            time.sleep(every)
            self.batch({"samples": []})

    def stop(self) -> None:
        """SIGTERM: checkpoint, then exit as a stopped process does."""
        with self.lock:
            self.checkpoint("stopped")
        self.exit(143)

    def maybe_publish(self) -> None:
        """Publish version published + 1 if this is rank 0 with a weights directory and it is time; a failed
        write (a full volume) publishes nothing."""
        if self.rank != 0 or not self.weights_dir or time.monotonic() - self.published_at < self.publish_seconds:
            return
        try:
            publish(self.weights_dir, self.published + 1)
        except OSError:
            return
        self.published, self.published_at = self.published + 1, time.monotonic()


class Controller:
    """Asynchronous RL loop with bounded staleness: generation runs ahead of training by at most
    RLOP_MAX_STALENESS policy versions."""

    def __init__(self) -> None:
        self.rate, self.checks = float(os.environ.get("RLOP_PROMPTS_PER_S", "2")), 1
        self.batch_size = int(os.environ.get("RLOP_BATCH", "16"))
        self.max_staleness = int(os.environ.get("RLOP_MAX_STALENESS", "2"))
        self.prompts = Counter("rlop_controller_prompts", "Prompts issued", list(LABELS)).labels(**LABELS)
        self.inflight = gauge("rlop_controller_inflight", "Prompts between rollout and trainer")
        self.checks_total = Counter("rlop_controller_checks", "Sandbox checks by outcome", [*LABELS, "outcome"])
        self.generations = Counter("rlop_controller_generations", "Generations by outcome", [*LABELS, "outcome"])
        self.policy_gauge = gauge("rlop_controller_policy_version", "The trainer's newest policy version")
        self.rollout_max_staleness = int(os.environ.get("RLOP_ROLLOUT_MAX_STALENESS", "1"))
        self.samples: list[dict[str, Any]] = []
        self.policy_version, self.live, self.lock = 0, 0, threading.Lock()
        threading.Thread(target=self.drive, daemon=True).start()

    def load(self, body: dict[str, Any]) -> dict[str, Any]:
        self.rate = float(body.get("prompts_per_s", self.rate))
        self.checks = int(body.get("checks_per_prompt", self.checks))
        return {"prompts_per_s": self.rate, "checks_per_prompt": self.checks}

    def drive(self) -> None:
        i = 0
        while True:
            if self.rate <= 0:
                time.sleep(0.2)
                continue
            time.sleep(random.expovariate(self.rate))
            if self.live > 64 * max(1, self.max_staleness):  # bounded staleness: do not run further ahead
                continue
            i += 1
            threading.Thread(target=self.episode, args=(f"prompt-{i}",), daemon=True).start()

    def episode(self, prompt: str) -> None:
        urls = {p: os.environ.get(f"RLOP_{p.upper()}_URL") for p in ("rollout", "reward", "sandbox")}
        self.prompts.inc()
        with self.lock:
            self.live += 1
            self.inflight.set(self.live)
        try:
            if not urls["rollout"]:
                return
            sample = self.generate(urls["rollout"], prompt)
            if sample is None:
                return  # lost: the sample is dropped
            if urls["reward"]:
                sample["score"] = post(f"{urls['reward']}/score", sample)["score"]
            if urls["sandbox"]:
                verdicts = [self.check(urls["sandbox"], sample) for _ in range(self.checks)]
                if None in verdicts:
                    return  # no verdict (the sandbox pool failed us): the sample is dropped, not scored
                sample["passed"] = all(verdicts)
            self.collect(sample)
        except OSError:
            pass
        finally:
            with self.lock:
                self.live -= 1
                self.inflight.set(self.live)

    def check(self, url: str, sample: dict[str, Any], attempts: int = 8) -> bool | None:
        """One verification: an infrastructure failure (a 503, a refused or reset connection) is retried,
        on whichever replica the Service picks; None when every attempt failed so."""
        outcome = self.checks_total.labels
        for attempt in range(attempts):
            try:
                verdict = bool(post(f"{url}/verify", {"code": sample["completion"], "expected": sample["expected"]})
                               ["passed"])  # fmt: skip
            except (OSError, ValueError):  # urllib's HTTPError (503 included) is an OSError
                outcome(**LABELS, outcome="retried").inc()
                time.sleep(0.2 * (attempt + 1))
                continue
            outcome(**LABELS, outcome="scored").inc()
            if "right" in sample and verdict != sample["right"]:
                outcome(**LABELS, outcome="misscored").inc()
            return verdict
        outcome(**LABELS, outcome="lost").inc()
        return None

    def generate(self, url: str, prompt: str, attempts: int = 8) -> dict[str, Any] | None:
        """One generation: an infrastructure failure is retried (as a check is); None when the sample is lost.
        A reply from weights more than RLOP_ROLLOUT_MAX_STALENESS versions behind the policy counts as stale."""
        outcome = self.generations.labels
        why = ""
        for attempt in range(attempts):
            try:
                reply = post(f"{url}/generate", {"text": prompt, "sampling_params": {"max_new_tokens": 8}})
            except (OSError, ValueError, http.client.HTTPException) as e:
                why = f"{e}: {_body(e)}" if isinstance(e, urllib.error.HTTPError) else repr(e)
                if not infrastructure(e):
                    break
                outcome(**LABELS, outcome="retried").inc()
                time.sleep(0.2 * (attempt + 1))
                continue
            outcome(**LABELS, outcome="served").inc()
            served = version_number(str(reply["meta_info"].get("weight_version", "")))
            if served < self.policy_version - self.rollout_max_staleness:
                outcome(**LABELS, outcome="stale").inc()
            return reply
        outcome(**LABELS, outcome="lost").inc()
        print(f"generation lost after {attempt + 1} attempts: {why}", file=sys.stderr, flush=True)
        return None

    def collect(self, sample: dict[str, Any]) -> None:
        with self.lock:
            self.samples.append(sample)
            if len(self.samples) < self.batch_size:
                return
            batch, self.samples = self.samples, []
        addr = os.environ.get("RLOP_TRAINER_URL") or f"http://{os.environ.get('RLOP_TRAINER_ADDR', '')}"
        with contextlib.suppress(OSError):
            self.policy_version = int(post(f"{addr}/batch", {"samples": batch}).get("policy_version", 0))
            self.policy_gauge.set(self.policy_version)


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (a timeout under backlog) is not worth a traceback."""


def read_body(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
    """The JSON body, sent with a Content-Length or chunked (as the API server's service proxy forwards it)."""
    if "chunked" not in handler.headers.get("Transfer-Encoding", "").lower():
        return json.loads(handler.rfile.read(int(handler.headers.get("Content-Length", 0))) or b"{}")  # type: ignore[no-any-return]
    data = b""
    while size := int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16):
        data += handler.rfile.read(size)
        handler.rfile.readline()  # the CRLF closing the chunk
    while handler.rfile.readline().strip():  # trailers, up to the empty line
        pass
    return json.loads(data or b"{}")  # type: ignore[no-any-return]


def serve_metrics(port: int) -> None:
    """/metrics in the classic text format: its OpenMetrics rendering escapes ':' in metric names
    (vllm:num_requests_waiting would be scraped as vllm_num_requests_waiting)."""

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = generate_latest()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = QuietServer(("0.0.0.0", port), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()


WORKER_RANK_ROUTES = {"GET /health": "health"}  # SGLang's ranks > 0 serve no API, only a health endpoint

ROLES: dict[str, tuple[Callable[[], object], dict[str, str]]] = {
    "rollout": (Rollout, {}),  # its routes depend on the SGLang API it answers as: Rollout.routes
    "reward": (Reward, {"POST /score": "score"}),
    "sandbox": (Sandbox, {"POST /verify": "verify"}),
    "trainer": (Trainer, {"POST /batch": "batch", "GET /state": "state"}),
    "controller": (Controller, {"POST /load": "load"}),
}


def server(role: Any, routes: dict[str, str], port: int) -> QuietServer:
    """The role's HTTP API: its routes ("POST /path" -> a method called with the JSON body, "GET /path" -> one
    called without), GET /healthz, GET /ready (503 while draining); the query string is ignored. Unavailable
    becomes a 503 whose body says it is an infrastructure failure, not a verdict; Rejected a 400."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.route(read_body(self))

        def do_GET(self) -> None:
            self.route({})

        def route(self, body: dict[str, Any]) -> None:
            key = f"{self.command} {urllib.parse.urlsplit(self.path).path}"
            try:
                if key == "POST /sim/replicas" and SIMULATED and hasattr(role, "slots"):
                    role.slots.resize(int(body["n"]))
                    out: Any = {"replicas": body["n"]}
                elif key in routes:
                    method = getattr(role, routes[key])
                    out = method(body) if self.command == "POST" else method()
                elif key == "GET /healthz":
                    out = {}
                elif key == "GET /ready":
                    if not getattr(role, "ready", lambda: True)():
                        raise Unavailable("draining")
                    out = {}
                else:
                    self.send_error(404)
                    return
            except Unavailable as e:
                self.reply(503, {"error": str(e), "infrastructure": True})
                return
            except Rejected as e:
                self.reply(400, e.body)
                return
            self.reply(200, out)

        def reply(self, code: int, out: Any) -> None:
            data = json.dumps(out).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return QuietServer(("0.0.0.0", port), Handler)


def main() -> None:
    cls, routes = ROLES[ROLE]
    role = cls()
    serve_metrics(METRICS_PORT)
    if isinstance(role, Rollout):  # an engine loads its model before its HTTP server (and /health) is up
        if (ranks := group()) is not None:
            ranks.join()  # rank 0 serves once the whole group is there; a lost rank ends the process
        time.sleep(float(os.environ.get("RLOP_LOAD_SECONDS", "2")))
        routes = role.routes if ranks is None or ranks.rank == 0 else WORKER_RANK_ROUTES
    if isinstance(role, Graceful | Trainer):  # stop gracefully: the handler returns at once, the stop runs beside
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=role.stop, daemon=True).start())
    server(role, routes, PORT).serve_forever()


if __name__ == "__main__":
    main()
