"""The reference workload: its sandbox really runs code, within limits, and stops without a false verdict; its
rollout serves a tiny real model behind SGLang's HTTP subset and loads the versions its trainer publishes."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_METRICS = ("rlop_sandbox_", "rlop_controller_", "rlop_reward_", "rlop_trainer_", "rlop_rollout_",
                    "rlop_policy_", "vllm:", "test_")  # fmt: skip


def workload() -> ModuleType:
    """The module, loaded afresh; the metrics an earlier load registered are dropped (each role registers its
    own in the default registry)."""
    for collector, names in list(REGISTRY._collector_to_names.items()):
        if any(n.startswith(WORKLOAD_METRICS) for n in names):
            REGISTRY.unregister(collector)
    spec = importlib.util.spec_from_file_location("rlop_workload", ROOT / "examples/workload/rlop_workload.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.argv = ["rlop_workload.py", "sandbox"]
    spec.loader.exec_module(module)
    return module


def test_the_workload_has_a_role_for_every_pool_kind() -> None:
    from rlop.api.pools import POOL_NAMES

    assert sorted(workload().ROLES) == sorted(POOL_NAMES)


def test_snippets_run_and_their_output_is_checked() -> None:
    w = workload()
    assert w.run_snippet("print(2 + 3)") == (True, "5")
    assert w.run_snippet("raise SystemExit(3)")[0] is False


def test_snippets_are_limited() -> None:
    w = workload()
    assert w.run_snippet("while True: pass", timeout=10) == (False, "")  # CPU limit (2 s) kills it
    ok, _ = w.run_snippet("x = bytearray(1 << 30)")  # 1 GiB > the 256 MiB address-space limit
    assert not ok
    leak = "import os; print(any(k in os.environ for k in ('PATH', 'HOME', 'KUBECONFIG')))"
    assert w.run_snippet(leak) == (True, "False")  # no inherited environment


def _serve(w: ModuleType, role: object, routes: dict[str, str]) -> tuple[str, object]:
    srv = w.server(role, routes, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}", srv


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _call(w: ModuleType, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST: (status, reply), an error's included."""
    try:
        return 200, w.post(url, body)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _wait(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _metric(w: ModuleType, name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, {**w.LABELS, **labels})


def _outcomes(counter: Any) -> dict[str, float]:
    """A counter's non-zero totals by outcome."""
    return {s.labels["outcome"]: s.value for m in counter.collect() for s in m.samples
            if s.name.endswith("_total") and s.value}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_drained_sandbox_turns_unready_refuses_new_checks_as_infrastructure_and_finishes_its_own(
    tmp_path: Path,
) -> None:
    w = workload()
    mark = tmp_path / "drain"
    mark.write_text("")  # the downward API file of an absent annotation
    box = w.Sandbox(drain_file=str(mark))
    box.check_seconds = 1.5
    url, srv = _serve(w, box, {"POST /verify": "verify"})
    assert _status(f"{url}/ready") == 200
    inflight: list[dict[str, object]] = []
    t = threading.Thread(target=lambda: inflight.append(w.post(f"{url}/verify", {"code": "print(1)", "expected": "1"})))
    t.start()
    time.sleep(0.3)
    mark.write_text("2026-12-01T00:00:00Z")  # rlop marks the pod
    deadline = time.monotonic() + 5
    while box.ready() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _status(f"{url}/ready") == 503
    try:
        w.post(f"{url}/verify", {"code": "print(1)", "expected": "1"})
        raise AssertionError("a draining sandbox took a new check")
    except urllib.error.HTTPError as e:
        assert e.code == 503 and json.loads(e.read())["infrastructure"] is True
    t.join(10)
    assert inflight == [{"passed": True, "stdout": "1"}]  # the check in flight got its verdict
    srv.shutdown()  # type: ignore[attr-defined]


def test_a_stopped_sandbox_answers_a_check_it_cuts_short_as_infrastructure_not_as_wrong() -> None:
    w = workload()
    box = w.Sandbox(drain_file="")
    box.check_seconds, box.stop_seconds = 30.0, 0.5
    url, srv = _serve(w, box, {"POST /verify": "verify"})
    got: list[object] = []

    def call() -> None:
        try:
            got.append(w.post(f"{url}/verify", {"code": "print(1)", "expected": "1"}))
        except urllib.error.HTTPError as e:
            got.append((e.code, json.loads(e.read())))

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.5)
    exited: list[int] = []
    box.stop(exit_=exited.append)
    t.join(10)
    assert exited == [0]
    assert got == [(503, {"error": "stopped mid-check: not a verdict", "infrastructure": True})]
    srv.shutdown()  # type: ignore[attr-defined]


def test_the_controller_retries_infrastructure_failures_and_never_scores_them() -> None:
    w = workload()
    sample = {"completion": "print(3)", "expected": "3", "right": True}
    drained = w.Sandbox(drain_file="")
    drained.drain()
    url, srv = _serve(w, drained, {"POST /verify": "verify"})
    ctl = w.Controller.__new__(w.Controller)  # the check alone, without the load thread
    ctl.checks_total = w.Counter("test_checks", "", [*w.LABELS, "outcome"])
    assert ctl.check(url, sample, attempts=2) is None  # every attempt refused: lost, not False
    drained.draining.clear()  # the replica is back (as another replica behind the Service would be)
    assert ctl.check(url, sample) is True
    assert _outcomes(ctl.checks_total) == {"retried": 2.0, "lost": 1.0, "scored": 1.0}
    srv.shutdown()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the rollout's model and SGLang's HTTP subset


def _tensors(**changes: Any) -> dict[str, Any]:
    """The model's tensors (zeros), with `changes` (None: the tensor left out)."""
    tensors = {"embed": np.zeros((64, 16), np.float32), "lm_head": np.zeros((16, 64), np.float32)} | changes
    return {name: t for name, t in tensors.items() if t is not None}


def test_weights_are_made_from_their_version_and_round_trip_through_safetensors(tmp_path: Path) -> None:
    w = workload()
    weights = w.make_weights(3)
    assert {n: (t.shape, t.dtype) for n, t in weights.items()} == {"embed": ((64, 16), np.float32),
                                                                   "lm_head": ((16, 64), np.float32)}  # fmt: skip
    assert all(np.array_equal(t, w.make_weights(3)[n]) for n, t in weights.items())
    assert not np.array_equal(weights["embed"], w.make_weights(4)["embed"])
    w.save_weights(str(tmp_path / "3"), weights)
    for path in (tmp_path / "3", tmp_path / "3" / "model.safetensors"):  # the directory or the file
        loaded = w.load_weights(str(path))
        assert set(loaded) == set(weights) and all(np.array_equal(loaded[n], t) for n, t in weights.items())


@pytest.mark.parametrize(
    ("tensors", "error"),
    [
        (None, "cannot read .*absent"),
        (b"not a checkpoint", "cannot read .*model.safetensors"),
        (_tensors(lm_head=None), r"tensors \['embed'\], expected \['embed', 'lm_head'\]"),
        (_tensors(bias=np.zeros(64, np.float32)), r"tensors \['bias', 'embed', 'lm_head'\]"),
        (_tensors(embed=np.zeros((64, 8), np.float32)), r"embed is float32\[64, 8\], expected float32\[64, 16\]"),
        (_tensors(lm_head=np.zeros((16, 64), np.float64)), r"lm_head is float64\[16, 64\], expected float32"),
    ],
    ids=["absent", "not safetensors", "a tensor missing", "a tensor too many", "a wrong shape", "a wrong dtype"],
)
def test_weights_that_are_not_the_models_are_refused_with_the_reason(tmp_path: Path, tensors: Any, error: str) -> None:
    w = workload()
    path = tmp_path / "absent"
    if isinstance(tensors, bytes):
        path = tmp_path
        (tmp_path / "model.safetensors").write_bytes(tensors)
    elif tensors is not None:
        path = tmp_path
        w.save_weights(str(tmp_path), tensors)
    with pytest.raises(ValueError, match=error):
        w.load_weights(str(path))


def test_the_rollout_answers_as_upstream_sglang_with_a_real_forward_pass() -> None:
    """SGLang v0.5.23's answers (tests/contract/sglang.py has them from its source): the version "default"
    until a load names one, at /model_info; no /get_weight_version, no /get_load; the load at /v1/loads."""
    w = workload()
    url, srv = _serve(w, (r := w.Rollout()), r.routes)
    info = {"model_path": "rlop-tiny", "served_model_name": "rlop-tiny", "tokenizer_path": None,
            "is_generation": True, "weight_version": "default"}  # fmt: skip
    replies = {
        "/health": {},
        "/health_generate": {},
        "/model_info": info,
        "/get_model_info?x=1": info,  # the deprecated alias; the query string ignored
        "/server_info": {"model_path": "rlop-tiny", "dp_size": 1, "version": "rlop-workload"},
    }
    assert {path: _get(url + path) for path in replies} == replies
    loads = _get(f"{url}/v1/loads")
    assert loads["loads"] == [{"dp_rank": 0, "num_running_reqs": 0, "num_waiting_reqs": 0}]
    assert (_status(f"{url}/get_weight_version"), _status(f"{url}/get_load")) == (404, 404)
    assert _call(w, f"{url}/flush_cache", {}) == (200, {"success": True})
    reply = w.post(f"{url}/generate", {"text": "1+1=", "sampling_params": {"max_new_tokens": 5}, "rid": "r"})
    assert reply["text"] == w.decode(w.greedy(w.make_weights(0), w.encode("1+1="), 5))
    meta = reply["meta_info"]
    assert (meta["prompt_tokens"], meta["completion_tokens"], meta["weight_version"]) == (4, 5, "default")
    assert meta["finish_reason"] == {"type": "length"} and meta["id"]
    assert (reply["prompt"], reply["version"]) == ("1+1=", -1)  # the RL sample: no version of the trainer's
    assert (str(eval(reply["completion"].removeprefix("print"))) == reply["expected"]) == reply["right"]
    by_ids = w.post(f"{url}/generate", {"input_ids": [65, 2]})["meta_info"]
    assert (by_ids["prompt_tokens"], by_ids["completion_tokens"]) == (2, 8)
    assert _call(w, f"{url}/generate", {"input_ids": [[1, 2]]})[0] == 400  # a batch: not served, not retried
    srv.shutdown()  # type: ignore[attr-defined]


def test_the_legacy_rollout_answers_as_older_and_slime_patched_sglang() -> None:
    w = workload()
    url, srv = _serve(w, (r := w.Rollout("legacy")), r.routes)
    assert _get(f"{url}/get_weight_version") == {"weight_version": "default"}
    assert _get(f"{url}/get_load") == [{"dp_rank": 0, "num_reqs": 0, "num_waiting_reqs": 0, "num_tokens": 0}]
    assert _get(f"{url}/get_model_info") == {"model_path": "rlop-tiny", "tokenizer_path": None, "is_generation": True}
    assert (_status(f"{url}/model_info"), _status(f"{url}/v1/loads")) == (404, 404)
    srv.shutdown()  # type: ignore[attr-defined]
    with pytest.raises(SystemExit, match="current or legacy"):
        w.Rollout("newest")


def test_a_rollout_loads_a_published_version_and_keeps_its_own_when_a_load_fails(tmp_path: Path) -> None:
    w = workload()
    url, srv = _serve(w, (r := w.Rollout()), r.routes)
    w.save_weights(str(tmp_path / "5"), w.make_weights(5))
    w.save_weights(str(tmp_path / "bad"), _tensors(embed=np.zeros((64, 8), np.float32)))
    update = f"{url}/update_weights_from_disk"
    code, out = _call(w, update, {"model_path": str(tmp_path / "5"), "weight_version": "5", "load_format": "auto"})
    assert (code, out["success"], out["num_paused_requests"]) == (200, True, 0)
    assert out["message"].endswith("Weight version updated to 5.")
    info = _get(f"{url}/model_info")  # SGLang moves model_path and served_model_name to the loaded path
    loaded = str(tmp_path / "5")
    assert (info["weight_version"], info["model_path"], info["served_model_name"]) == ("5", loaded, loaded)
    reply = w.post(f"{url}/generate", {"text": "1+1="})
    assert (reply["meta_info"]["weight_version"], reply["version"]) == ("5", 5)
    assert reply["text"] == w.decode(w.greedy(w.make_weights(5), w.encode("1+1="), 8))
    failures = {
        "absent": {"model_path": str(tmp_path / "6"), "weight_version": "6"},
        "wrong shapes": {"model_path": str(tmp_path / "bad"), "weight_version": "6"},
        "no path": {"weight_version": "6"},
        "a version that is no string": {"model_path": str(tmp_path / "5"), "weight_version": 6},
    }
    for case, body in failures.items():
        code, out = _call(w, update, body)
        assert (code, out["success"]) == (400, False) and out["message"], case
        assert _get(f"{url}/model_info")["weight_version"] == "5", case
    assert _call(w, update, {"model_path": str(tmp_path / "5" / "model.safetensors")})[0] == 200  # version kept
    assert _get(f"{url}/model_info")["weight_version"] == "5"
    code, out = _call(w, update, {"model_path": str(tmp_path / "5"), "weight_version": "step-5"})  # opaque strings
    assert code == 200 and _get(f"{url}/model_info")["weight_version"] == "step-5"
    assert _metric(w, "rlop_rollout_weight_version") == -1  # not a version of the trainer's
    assert _metric(w, "rlop_rollout_weight_updates_total", result="ok") == 3
    assert _metric(w, "rlop_rollout_weight_updates_total", result="failed") == len(failures)
    srv.shutdown()  # type: ignore[attr-defined]


def test_a_generation_in_flight_finishes_on_the_weights_it_started_with(tmp_path: Path) -> None:
    w = workload()
    url, srv = _serve(w, (r := w.Rollout()), r.routes)
    w.save_weights(str(tmp_path / "1"), w.make_weights(1))
    got: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: got.append(w.post(f"{url}/generate", {"text": "x"})))
    t.start()
    _wait(lambda: _get(f"{url}/v1/loads")["loads"][0]["num_running_reqs"] == 1)
    time.sleep(0.05)  # past taking its weights: it is decoding (0.3 s at least)
    update = {"model_path": str(tmp_path / "1"), "weight_version": "1"}
    assert w.post(f"{url}/update_weights_from_disk", update)["success"]
    t.join(10)
    assert got[0]["meta_info"]["weight_version"] == "default"
    assert got[0]["text"] == w.decode(w.greedy(w.make_weights(0), w.encode("x"), 8))
    assert w.post(f"{url}/generate", {"text": "x"})["meta_info"]["weight_version"] == "1"
    srv.shutdown()  # type: ignore[attr-defined]


def test_a_stopped_rollout_refuses_new_generations_as_infrastructure_and_finishes_its_own() -> None:
    w = workload()
    rollout = w.Rollout()
    url, srv = _serve(w, rollout, rollout.routes)
    got: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: got.append(w.post(f"{url}/generate", {"text": "x"})))
    t.start()
    _wait(lambda: _get(f"{url}/v1/loads")["loads"][0]["num_running_reqs"] == 1)
    exited: list[int] = []
    stopper = threading.Thread(target=rollout.stop, kwargs={"exit_": exited.append})
    stopper.start()
    _wait(lambda: not rollout.ready())
    refused = {"error": "draining: this replica takes no new generations", "infrastructure": True}
    assert _call(w, f"{url}/generate", {"text": "y"}) == (503, refused)
    assert (_status(f"{url}/ready"), _status(f"{url}/health")) == (503, 503)  # the router stops sending here
    t.join(10)
    stopper.join(10)
    assert got[0]["meta_info"]["weight_version"] == "default" and exited == [0]
    srv.shutdown()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the trainer's checkpoints


def test_the_trainer_publishes_atomically_keeps_the_newest_8_and_resumes_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = workload()
    trainer = w.Trainer(weights_dir=str(tmp_path), rank=0)
    assert (trainer.published, _metric(w, "rlop_policy_version")) == (0, 0)
    assert w.checkpoints(str(tmp_path)) == [0]  # its starting weights, for the engines to load before step 1
    trainer.publish_seconds = 0
    writes: list[tuple[str, bool]] = []
    save = w.save_weights

    def spy(path: str, tensors: Any) -> None:  # where version v is written; is it under its name once written?
        save(path, tensors)
        v = len(writes) + 1
        writes.append((os.path.basename(path), (tmp_path / str(v)).exists()))

    monkeypatch.setattr(w, "save_weights", spy)
    for _ in range(10):
        trainer.maybe_publish()
    assert writes == [(f".tmp-{v}-{os.getpid()}", False) for v in range(1, 11)]  # written aside, then renamed
    assert sorted(os.listdir(tmp_path), key=int) == [str(v) for v in range(3, 11)]  # the newest 8, no temp dir
    assert np.array_equal(w.load_weights(str(tmp_path / "10"))["lm_head"], w.make_weights(10)["lm_head"])
    assert _metric(w, "rlop_policy_version") == 10
    assert trainer.batch({"samples": [{"version": 9}, {"version": 10}]}) == {"version": 1, "policy_version": 11}
    assert _metric(w, "rlop_trainer_staleness") == 1  # 10 published when the step ran on version 9

    w = workload()  # restarted
    restarted = w.Trainer(weights_dir=str(tmp_path), rank=0)
    restarted.maybe_publish()  # not yet: RLOP_PUBLISH_SECONDS after the start
    assert (restarted.published, _metric(w, "rlop_policy_version")) == (11, 11)
    restarted.publish_seconds = 0
    restarted.maybe_publish()
    assert w.checkpoints(str(tmp_path)) == list(range(5, 13))

    w = workload()
    follower = w.Trainer(weights_dir=str(tmp_path), rank=1)
    follower.publish_seconds = 0
    follower.maybe_publish()  # only rank 0 publishes
    assert _metric(w, "rlop_policy_version") == 12
    w.publish(str(tmp_path), 13)
    assert _metric(w, "rlop_policy_version") == 13  # read from the directory when scraped


@pytest.mark.parametrize("weights_dir", ["", "a file"], ids=["no directory", "an unwritable directory"])
def test_a_trainer_that_cannot_publish_stays_at_version_0(tmp_path: Path, weights_dir: str) -> None:
    w = workload()
    if weights_dir:
        weights_dir = str(tmp_path / "file")
        Path(weights_dir).write_text("")
    trainer = w.Trainer(weights_dir=weights_dir, rank=0)
    trainer.publish_seconds = 0
    trainer.maybe_publish()
    assert (trainer.published, _metric(w, "rlop_policy_version")) == (0, 0)
    assert os.listdir(tmp_path) == (["file"] if weights_dir else [])


def test_a_restarted_gang_resumes_from_the_checkpoint_and_is_done_at_its_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = workload()
    exits: list[int] = []
    mark = tmp_path / "checkpoint-now"
    mark.write_text("")
    monkeypatch.setenv("RLOP_CHECKPOINT_NOW_FILE", str(mark))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    rank0 = w.Trainer(rank=0, checkpoint_dir=str(ckpt), steps=3, exit_=exits.append)
    for _ in range(2):
        rank0.batch({"samples": []})
    assert json.loads((ckpt / w.STATE_FILE).read_text())["step"] == 2 and exits == []
    mark.write_text("2026-12-04T12:00:00Z node n1 cordoned")  # rlop's checkpoint-now mark
    deadline = time.monotonic() + 5
    while not _metric(w, "rlop_trainer_checkpoints_total", why="requested") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _metric(w, "rlop_trainer_checkpoints_total", why="requested") == 1
    rank0.stop()  # SIGTERM: checkpointed, then exit 143 as a stopped process
    assert exits == [143] and _metric(w, "rlop_trainer_checkpoints_total", why="stopped") == 1

    w = workload()  # the gang restarted: the step goes on
    monkeypatch.setenv("RLOP_RESTART_COUNT", "1")
    again = w.Trainer(rank=0, checkpoint_dir=str(ckpt), steps=3, exit_=exits.append)
    assert again.state() == {"step": 2, "resumed_from": 2, "restart": 1, "rank": 0}
    assert _metric(w, "rlop_trainer_step") == 2
    again.batch({"samples": []})
    assert exits == [143, 0]  # step 3 of 3: done, exit 0
    w = workload()
    w.Trainer(rank=1, checkpoint_dir=str(ckpt), steps=3, exit_=exits.append)  # a rank started after the end
    assert exits == [143, 0, 0]


# ---------------------------------------------------------------- the controller's generations


class FakeRollout:
    """Answers successive generations from `versions`: a weight version, None (a 503) or "400"."""

    def __init__(self, w: ModuleType, versions: list[str | None]) -> None:
        self.w, self.versions = w, versions

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        version = self.versions.pop(0)
        if version is None:
            raise self.w.Unavailable("stopping")
        if version == "400":
            raise self.w.Rejected({"error": "not a prompt"})
        return {"text": "", "meta_info": {"weight_version": version}, "version": int(version)}


def _controller(w: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("RLOP_PROMPTS_PER_S", "0")  # no load of its own: only the generations asked for
    monkeypatch.delenv("RLOP_ROLLOUT_MAX_STALENESS", raising=False)  # 1
    return w.Controller()


@pytest.mark.parametrize(
    ("versions", "outcomes"),
    [
        (["5"], {"served": 1}),
        (["4"], {"served": 1}),  # 5 - 4 = RLOP_ROLLOUT_MAX_STALENESS: not stale
        (["3"], {"served": 1, "stale": 1}),
        ([None, "5"], {"retried": 1, "served": 1}),
        ([None, None], {"retried": 2, "lost": 1}),
        (["400"], {"lost": 1}),  # not an infrastructure failure: not retried
    ],
    ids=["current", "1 behind", "2 behind", "a 503 then served", "every attempt a 503", "a 400"],
)
def test_the_controller_counts_generations_retried_lost_and_stale(
    monkeypatch: pytest.MonkeyPatch, versions: list[str | None], outcomes: dict[str, float]
) -> None:
    w = workload()
    url, srv = _serve(w, FakeRollout(w, versions), {"POST /generate": "generate"})
    ctl = _controller(w, monkeypatch)
    ctl.policy_version = 5
    reply = ctl.generate(url, "prompt-1", attempts=2)
    assert (reply is None) == ("lost" in outcomes)
    assert _outcomes(ctl.generations) == outcomes
    srv.shutdown()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "failure",
    # sglang-router 0.3.2 (smg-project/smg c7f9bf9f5): src/routers/http/router.rs:560-569, 657-706 and
    # src/routers/error.rs:8-19, 55-81 (its worker is gone), router.rs:279-287 (none left); 0.2.x (c8b385017):
    # router.rs:526-530
    [(500, b'{"error":{"type":"Internal Server Error","code":"call_upstream_request_error","message":"x"}}'),
     (500, b"Request failed: error sending request for url (http://10.0.0.5:8000/generate)"),
     (503, b'{"error":{"type":"Service Unavailable","code":"no_available_workers","message":"x"}}'),
     (404, b"")],  # what answered where a replica was
)  # fmt: skip
def test_a_router_that_could_not_reach_its_worker_is_retried_not_lost(
    monkeypatch: pytest.MonkeyPatch, failure: tuple[int, bytes]
) -> None:
    """A failure on the way to a replica is retried as a 503 is, never lost at once."""
    w = workload()
    served = {"text": "", "meta_info": {"weight_version": "5"}, "version": 5}
    answers = [failure, (200, json.dumps(served).encode())]

    class Router(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            code, body = answers.pop(0)
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Router)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    ctl = _controller(w, monkeypatch)
    ctl.policy_version = 5
    assert ctl.generate(f"http://127.0.0.1:{srv.server_address[1]}", "prompt-1", attempts=2) is not None
    assert _outcomes(ctl.generations) == {"retried": 1, "served": 1}
    srv.shutdown()


def test_the_controller_learns_the_policy_version_from_the_trainer_and_retries_a_refused_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = workload()

    class FakeTrainer:
        def batch(self, body: dict[str, Any]) -> dict[str, Any]:
            return {"version": 7, "policy_version": 5}

    trainer_url, trainer_srv = _serve(w, FakeTrainer(), {"POST /batch": "batch"})
    rollout_url, rollout_srv = _serve(w, (r := w.Rollout()), r.routes)
    monkeypatch.setenv("RLOP_TRAINER_URL", trainer_url)
    monkeypatch.setenv("RLOP_BATCH", "1")
    ctl = _controller(w, monkeypatch)
    ctl.collect({"version": 0})
    assert (ctl.policy_version, _metric(w, "rlop_controller_policy_version")) == (5, 5)
    assert ctl.generate(rollout_url, "prompt-1")["meta_info"]["weight_version"] == "default"  # the real rollout
    assert ctl.generate(f"http://127.0.0.1:{_free_port()}", "prompt-2", attempts=2) is None  # nobody listens
    assert _outcomes(ctl.generations) == {"served": 1, "stale": 1, "retried": 2, "lost": 1}
    trainer_srv.shutdown()  # type: ignore[attr-defined]
    rollout_srv.shutdown()  # type: ignore[attr-defined]


def test_a_group_leader_serves_only_once_every_rank_connected_and_a_lost_rank_ends_the_others() -> None:
    """SGLang's --nnodes rendezvous in the reference server: rank 0 waits for the whole group (a real TCP
    rendezvous), and a rank killed ends the group (a real engine's collective is gone)."""
    w = workload()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exits: dict[int, list[int]] = {0: [], 1: [], 2: []}

    def exiter(rank: int) -> Any:
        def exit_(code: int) -> None:  # as the process ends: its sockets close
            exits[rank].append(code)
            for peer in ranks[rank].peers:
                peer.close()

        return exit_

    ranks = {r: w.Rendezvous(3, r, f"127.0.0.1:{port}", patience=2, exit_=exiter(r)) for r in range(3)}
    leader = threading.Thread(target=ranks[0].join, kwargs={"timeout": 20})
    leader.start()
    one = threading.Thread(target=ranks[1].join, kwargs={"timeout": 20})
    one.start()
    one.join(1.5)
    assert leader.is_alive() and one.is_alive()  # two of three: nobody serves yet
    with socket.create_connection(("127.0.0.1", port)) as stranger:  # not a rank of the group: turned away
        stranger.sendall(b"hello\n")
        assert stranger.recv(3) == b""
    with socket.create_connection(("127.0.0.1", port)) as silent:  # a probe that says nothing: turned away
        assert silent.recv(3) == b""
    time.sleep(2.5)  # rank 2 comes later than rank 1's connect timeout (its patience): rank 1 still waits
    assert leader.is_alive() and one.is_alive()
    ranks[2].join(timeout=20)
    leader.join(5)
    one.join(5)
    assert not leader.is_alive() and not one.is_alive() and all(not e for e in exits.values())
    time.sleep(2.5)  # beats keep a healthy group together past its patience
    assert all(not e for e in exits.values())
    ranks[2].peers[0].close()  # rank 2 is gone (as a kill -9 closes its sockets)
    _wait(lambda: exits[0][:1] == [1])
    _wait(lambda: exits[1][:1] == [1])  # the leader gone, rank 1 goes too (its collective is gone)


def test_a_group_needs_its_rank_and_the_leaders_address() -> None:
    w = workload()
    with pytest.raises(SystemExit, match="not in"):
        w.Rendezvous(2, 2, "leader:5000")
    with pytest.raises(SystemExit, match="host:port"):
        w.Rendezvous(2, 1, "leader")


def test_a_rank_that_falls_silent_without_closing_ends_the_group_after_its_patience() -> None:
    """A node gone sends no FIN: the heartbeat is what notices."""
    w = workload()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exits: list[int] = []
    leader = w.Rendezvous(2, 0, f"127.0.0.1:{port}", patience=1, exit_=exits.append)
    joined = threading.Thread(target=leader.join, kwargs={"timeout": 20})
    joined.start()
    silent = None
    for _ in range(100):
        try:
            silent = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            time.sleep(0.05)
    assert silent is not None
    silent.sendall(b"1\n")
    assert silent.recv(3) == b"ok\n"
    joined.join(5)
    _wait(lambda: exits == [1], timeout=30)  # no beat from it: the group is over
    silent.close()
