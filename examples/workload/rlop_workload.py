"""A reference RL workload for rlop: one program, one role per pool. A demo, not a training framework.

    python rlop_workload.py controller|rollout|reward|sandbox|trainer

Roles find each other through the variables rlop injects (RLOP_ROLLOUT_URL, RLOP_REWARD_URL,
RLOP_SANDBOX_URL, RLOP_TRAINER_ADDR, ...) and export Prometheus metrics on :9400 with the labels
namespace, rljob and pool, under the names the example RLJob scales on:

- rollout:    simulated generation, vLLM metric names (vllm:num_requests_waiting, vllm:num_requests_running)
- reward:     scores completions (rlop_reward_pending)
- sandbox:    really executes the submitted Python snippets in a resource-limited subprocess and checks
              their output (rlop_sandbox_queue_depth, rlop_sandbox_verifications_total). Drained (rlop's
              mark in RLOP_DRAIN_FILE) or stopped (SIGTERM), it turns NotReady, refuses new checks with a 503
              marked as an infrastructure failure, finishes the ones in flight, and answers any it must cut
              short the same way: a verdict is only ever a verdict.
- trainer:    consumes batches, exports step time and staleness (rlop_trainer_step_seconds, ...)
- controller: drives the asynchronous loop prompts -> rollout -> reward + sandbox -> trainer with a bounded
              staleness; POST /load {"prompts_per_s": x, "checks_per_prompt": k} changes the load. A check
              that fails for infrastructure (a 503, a reset connection) is retried, never scored as wrong
              (rlop_controller_checks_total{outcome}: scored, retried, lost, misscored against the truth).

With RLOP_SIMULATED=1 (rlop's demo on simulated nodes) one process stands for a whole pool and serves at
the rate of the replicas rlop runs: POST /sim/replicas {"n": k}.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
    return Gauge(name, doc, list(LABELS)).labels(**LABELS)  # type: ignore[no-any-return]


class Unavailable(Exception):
    """Not a verdict: the replica cannot do this now (draining, stopping); try another one."""


def post(url: str, body: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")  # type: ignore[no-any-return]


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


# ---------------------------------------------------------------- roles


class Rollout:
    def __init__(self) -> None:
        self.slots = Slots(gauge("vllm:num_requests_waiting", "Requests waiting for a slot"),
                           gauge("vllm:num_requests_running", "Requests being generated"))  # fmt: skip
        self.version = 0

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.slots:
            time.sleep(random.uniform(0.3, 0.7))  # simulated decoding
        a, b = random.randint(1, 99), random.randint(1, 99)
        right = random.random() < 0.7  # the policy is right 70 % of the time
        code = f"print({a} + {b})" if right else f"print({a} - {b})"
        sample = {"prompt": body.get("prompt"), "completion": code, "expected": str(a + b), "right": right}
        return sample | {"version": self.version}

    def weights(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version = int(body["version"])
        return {"version": self.version}


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


class Sandbox:
    """Verifies code; stops gracefully: drained or stopped, no new check, the ones in flight finished (or,
    past the stop deadline, answered as infrastructure failures), never a made-up verdict."""

    def __init__(self, drain_file: str = os.environ.get("RLOP_DRAIN_FILE", "")) -> None:
        self.slots = Slots(gauge("rlop_sandbox_queue_depth", "Verifications waiting for a slot"))
        self.results = Counter("rlop_sandbox_verifications", "Verifications run", [*LABELS, "result"])
        self.draining_gauge = gauge("rlop_sandbox_draining", "1 once the replica stops taking checks")
        self.check_seconds = float(os.environ.get("RLOP_CHECK_SECONDS", "0.5"))  # a test suite's length
        self.stop_seconds = float(os.environ.get("RLOP_STOP_SECONDS", "20"))  # below terminationGracePeriod
        self.draining, self.aborted = threading.Event(), threading.Event()
        self.inflight, self.lock = 0, threading.Lock()
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
        self.draining.set()
        self.draining_gauge.set(1)

    def ready(self) -> bool:
        return not self.draining.is_set()

    def stop(self, exit_: Any = os._exit) -> None:
        """SIGTERM: drain, wait for the checks in flight (up to stop_seconds), cut the rest short, exit."""
        self.drain()
        deadline = time.monotonic() + self.stop_seconds
        while self.inflight and time.monotonic() < deadline:
            time.sleep(0.1)
        self.aborted.set()
        while self.inflight and time.monotonic() < deadline + 2:  # their 503s go out
            time.sleep(0.05)
        exit_(0)

    def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.draining.is_set():
            self.results.labels(**LABELS, result="refused").inc()
            raise Unavailable("draining: this replica takes no new checks")
        with self.lock:
            self.inflight += 1
        try:
            with self.slots:
                started = time.monotonic()
                ok, stdout = run_snippet(body["code"])
                self.aborted.wait(max(0.0, self.check_seconds - (time.monotonic() - started)))
            if self.aborted.is_set():
                self.results.labels(**LABELS, result="aborted").inc()
                raise Unavailable("stopped mid-check: not a verdict")
        finally:
            with self.lock:
                self.inflight -= 1
        passed = ok and stdout == body.get("expected")
        self.results.labels(**LABELS, result="pass" if passed else "fail").inc()
        return {"passed": passed, "stdout": stdout[:200]}


class Trainer:
    def __init__(self) -> None:
        self.step_seconds = Histogram("rlop_trainer_step_seconds", "Time of one optimizer step", list(LABELS))
        self.staleness = gauge("rlop_trainer_staleness", "Policy versions between generation and training")
        self.steps = Counter("rlop_trainer_steps", "Optimizer steps", list(LABELS))
        self.version, self.lock = 0, threading.Lock()
        self.rank = int(os.environ.get("RLOP_TRAINER_RANK", "0") or 0)

    def batch(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:  # one step at a time
            started = time.monotonic()
            time.sleep(random.uniform(0.5, 1.0))  # simulated forward/backward/all-reduce
            self.version += 1
            self.staleness.set(self.version - min(s.get("version", 0) for s in body["samples"]))
            self.step_seconds.labels(**LABELS).observe(time.monotonic() - started)
            self.steps.labels(**LABELS).inc()
        if self.rank == 0 and (url := os.environ.get("RLOP_ROLLOUT_URL")):
            with contextlib.suppress(OSError):
                post(f"{url}/weights", {"version": self.version}, timeout=5)
        return {"version": self.version}


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
        self.version, self.samples, self.lock = 0, [], threading.Lock()
        self.live = 0
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
            sample = post(f"{urls['rollout']}/generate", {"prompt": prompt})
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

    def collect(self, sample: dict[str, Any]) -> None:
        with self.lock:
            self.samples.append(sample)
            if len(self.samples) < self.batch_size:
                return
            batch, self.samples = self.samples, []
        addr = os.environ.get("RLOP_TRAINER_URL") or f"http://{os.environ.get('RLOP_TRAINER_ADDR', '')}"
        with contextlib.suppress(OSError):
            self.version = post(f"{addr}/batch", {"samples": batch})["version"]


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


ROLES = {"rollout": (Rollout, {"/generate": "generate", "/weights": "weights"}),
         "reward": (Reward, {"/score": "score"}),
         "sandbox": (Sandbox, {"/verify": "verify"}),
         "trainer": (Trainer, {"/batch": "batch"}),
         "controller": (Controller, {"/load": "load"})}  # fmt: skip


def server(role: Any, routes: dict[str, str], port: int) -> QuietServer:
    """The role's HTTP API: its POST routes, GET /healthz, GET /ready (503 while draining); Unavailable
    becomes a 503 whose body says it is an infrastructure failure, not a verdict."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = read_body(self)
            try:
                if self.path == "/sim/replicas" and SIMULATED and hasattr(role, "slots"):
                    role.slots.resize(int(body["n"]))
                    out: dict[str, Any] = {"replicas": body["n"]}
                elif self.path in routes:
                    out = getattr(role, routes[self.path])(body)
                else:
                    self.send_error(404)
                    return
            except Unavailable as e:
                self.reply(503, {"error": str(e), "infrastructure": True})
                return
            self.reply(200, out)

        def do_GET(self) -> None:
            ready = getattr(role, "ready", lambda: True)()
            code = {"/healthz": 200, "/ready": 200 if ready else 503}.get(self.path, 404)
            self.send_response(code)
            self.end_headers()

        def reply(self, code: int, out: dict[str, Any]) -> None:
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
    role = cls()  # type: ignore[abstract]
    serve_metrics(METRICS_PORT)
    if isinstance(role, Sandbox):  # stop gracefully: the handler returns at once, the drain runs beside
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=role.stop, daemon=True).start())
    server(role, routes, PORT).serve_forever()


if __name__ == "__main__":
    main()
