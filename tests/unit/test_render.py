from __future__ import annotations

from rlop.api.names import GANG_GATE, HASH_ANNOTATION
from rlop.plan.render import render, sandbox_pod, spec_hash

from .builders import container, job


def _by_kind(objs: list[dict]) -> dict[tuple[str, str], dict]:  # type: ignore[type-arg]
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def test_one_workload_and_one_service_per_pool_with_deterministic_names() -> None:
    sandbox = {"spec": {"containers": [container(requests={"cpu": 1, "memory": "1Gi"})]}}
    j = job(sandbox={"replicas": 3, "placement": {"strategy": "default"}, "template": sandbox})
    objs = _by_kind(render(j, {"trainer": 2, "rollout": 1, "sandbox": 3}))
    assert set(objs) == {
        ("StatefulSet", "j-trainer"), ("Service", "j-trainer"),
        ("Deployment", "j-rollout"), ("Service", "j-rollout"),
        ("Deployment", "j-sandbox"), ("Service", "j-sandbox"), ("NetworkPolicy", "j-sandbox-egress"),
    }  # fmt: skip
    policy = objs[("NetworkPolicy", "j-sandbox-egress")]["spec"]
    assert policy["policyTypes"] == ["Egress"] and policy["egress"] == []  # untrusted code: no egress
    assert policy["podSelector"]["matchLabels"] == {"rlop.dev/job": "j", "rlop.dev/pool": "sandbox"}
    for obj in objs.values():
        meta = obj["metadata"]
        assert meta["namespace"] == "ns"
        assert meta["labels"]["rlop.dev/job"] == "j"
        owner = meta["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "RLJob",
            "j",
            "uid-1",
            True,
        )
    assert objs[("Deployment", "j-sandbox")]["spec"]["replicas"] == 3


def test_trainer_is_gated_parallel_ondelete_with_headless_service() -> None:
    objs = _by_kind(render(job(), {"trainer": 2, "rollout": 1}))
    sts = objs[("StatefulSet", "j-trainer")]["spec"]
    assert sts["podManagementPolicy"] == "Parallel"
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["template"]["spec"]["schedulingGates"] == [{"name": GANG_GATE}]
    svc = objs[("Service", "j-trainer")]["spec"]
    assert svc["clusterIP"] == "None" and svc["publishNotReadyAddresses"] is True
    assert svc["ports"][0]["port"] == 29500


def test_discovery_env_is_injected_and_user_env_wins() -> None:
    rollout = {"replicas": 1, "template": {"spec": {"containers": [
        {**container(), "env": [{"name": "RLOP_POOL", "value": "mine"}]}]}}}  # fmt: skip
    objs = _by_kind(render(job(rollout=rollout), {"trainer": 2, "rollout": 1}))
    env = objs[("Deployment", "j-rollout")]["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert names.count("RLOP_POOL") == 1 and {"name": "RLOP_POOL", "value": "mine"} in env
    assert {"name": "RLOP_TRAINER_ADDR", "value": "j-trainer-0.j-trainer.ns.svc:29500"} in env
    assert {"name": "RLOP_ROLLOUT_URL", "value": "http://j-rollout.ns.svc:8000"} in env
    assert "RLOP_TRAINER_REPLICAS" not in names  # world size only reaches the trainers
    trainer_env = objs[("StatefulSet", "j-trainer")]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "RLOP_TRAINER_REPLICAS", "value": "2"} in trainer_env
    assert any(e["name"] == "RLOP_TRAINER_RANK" for e in trainer_env)


def test_hash_is_stable_tracks_the_rendering_and_leaves_out_the_replicas() -> None:
    a = render(job(), {"trainer": 2, "rollout": 1})
    b = render(job(), {"trainer": 2, "rollout": 1})
    c = render(job(), {"trainer": 2, "rollout": 3})  # a scale: written through /scale, not a new rendering
    other = {"replicas": 1, "template": {"spec": {"containers": [{**container(), "image": "other"}]}}}
    d = render(job(rollout=other), {"trainer": 2, "rollout": 1})
    hashes = [[o["metadata"]["annotations"][HASH_ANNOTATION] for o in objs] for objs in (a, b, c, d)]
    assert hashes[0] == hashes[1] == hashes[2]
    assert hashes[0][2] != hashes[3][2]  # the rollout Deployment's template changed
    assert hashes[0][0] == hashes[3][0]  # the trainer did not
    assert spec_hash({"a": 1}) == spec_hash({"a": 1})


def test_harvested_sandbox_pods_are_pinned_hardened_and_low_priority() -> None:
    sandbox = {"spec": {"containers": [{**container(requests={"cpu": 1, "memory": "1Gi"}),
                                        "securityContext": {"privileged": True}}], "hostNetwork": True}}  # fmt: skip
    j = job(sandbox={"replicas": 1, "template": sandbox})
    objs = _by_kind(render(j, {"trainer": 2, "rollout": 1, "sandbox": 1}))
    assert ("Deployment", "j-sandbox") not in objs  # rlop places these pods itself
    pod = sandbox_pod(j, j.spec.pools.sandbox, "j-sandbox-0", "cpu-3")
    spec = pod["spec"]
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term == {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["cpu-3"]}]}
    assert spec["priorityClassName"] == "rlop-harvest"
    assert spec["automountServiceAccountToken"] is False and spec["hostNetwork"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    c = spec["containers"][0]
    assert c["securityContext"]["privileged"] is False  # the template cannot weaken it
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["resources"]["limits"] == {"cpu": 1, "memory": "1Gi"}
    assert pod["metadata"]["labels"]["rlop.dev/harvest"] == "true"


def test_harvested_sandbox_pods_see_their_drain_mark_whatever_the_template_says() -> None:
    """A downward API file of the rlop.dev/drain annotation in every container; a template volume, mount or
    variable of the same name does not replace it."""
    hostile = {**container(requests={"cpu": 1, "memory": "1Gi"}),
               "env": [{"name": "RLOP_DRAIN_FILE", "value": "/dev/null"}],
               "volumeMounts": [{"name": "rlop-drain", "mountPath": "/data"}]}  # fmt: skip
    plain = {**container(requests={"cpu": 1, "memory": "1Gi"}), "name": "side"}
    tpl = {"spec": {"containers": [hostile, plain], "volumes": [{"name": "rlop-drain", "emptyDir": {}}]}}
    spec = sandbox_pod(*_sandbox(job(sandbox={"replicas": 1, "template": tpl})), "j-sandbox-0", "cpu-3")["spec"]
    drain = [v for v in spec["volumes"] if v["name"] == "rlop-drain"]
    field = "metadata.annotations['rlop.dev/drain']"
    assert drain == [
        {"name": "rlop-drain", "downwardAPI": {"items": [{"path": "drain", "fieldRef": {"fieldPath": field}}]}}
    ]
    for c in spec["containers"]:
        assert [m for m in c["volumeMounts"] if m["name"] == "rlop-drain"] == [
            {"name": "rlop-drain", "mountPath": "/etc/rlop", "readOnly": True}
        ]
        assert [e["value"] for e in c["env"] if e["name"] == "RLOP_DRAIN_FILE"] == ["/etc/rlop/drain"]


def test_a_container_that_mounts_its_own_volume_at_the_drain_dir_keeps_it_and_is_told_no_drain_file() -> None:
    own = {
        **container(requests={"cpu": 1, "memory": "1Gi"}),
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/rlop"}],
    }
    tpl = {"spec": {"containers": [own], "volumes": [{"name": "cfg", "emptyDir": {}}]}}
    pod = sandbox_pod(*_sandbox(job(sandbox={"replicas": 1, "template": tpl})), "j-sandbox-0", "cpu-3")
    c = pod["spec"]["containers"][0]
    assert [m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/etc/rlop"] == ["cfg"]
    assert not [e for e in c.get("env", []) if e["name"] == "RLOP_DRAIN_FILE"]


def test_every_sandbox_container_is_hardened_init_containers_too() -> None:
    weak = {"runAsNonRoot": False, "allowPrivilegeEscalation": True, "runAsUser": 0, "capabilities": {"add": ["X"]}}
    probe = {"httpGet": {"host": "169.254.169.254", "port": 80}}
    spec = {
        "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}, "runAsUser": 0},
        "initContainers": [{**container("init", requests={"cpu": 1, "memory": "1Gi"}), "securityContext": weak}],
        "containers": [{**container(requests={"cpu": 1, "memory": "1Gi"}), "livenessProbe": probe,
                        "lifecycle": {"preStop": {"tcpSocket": {"host": "10.0.0.1", "port": 22}}}}],
    }  # fmt: skip
    j = job(sandbox={"replicas": 1, "placement": {"strategy": "default"}, "template": {"spec": spec}})
    (deployment,) = [m for m in render(j, {"trainer": 2, "rollout": 1, "sandbox": 1}) if m["metadata"]["name"] ==
                     "j-sandbox" and m["kind"] == "Deployment"]  # fmt: skip
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "Localhost", "localhostProfile": "p.json"}  # kept
    assert pod["securityContext"]["runAsUser"] == 65532 and pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["automountServiceAccountToken"], pod["enableServiceLinks"], pod["hostNetwork"]) == (False, False, False)
    for c in pod["containers"] + pod["initContainers"]:
        sec = c["securityContext"]
        assert (sec["allowPrivilegeEscalation"], sec["runAsNonRoot"], sec["privileged"]) == (False, True, False)
        assert sec["capabilities"] == {"drop": ["ALL"]} and "runAsUser" not in sec
        assert sec["readOnlyRootFilesystem"] is True
        assert c["resources"]["limits"] == {"cpu": 1, "memory": "1Gi"}
        assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    main = pod["containers"][0]
    assert "host" not in main["livenessProbe"]["httpGet"] and "host" not in main["lifecycle"]["preStop"]["tcpSocket"]


def _sandbox(j):  # type: ignore[no-untyped-def]
    return j, j.spec.pools.sandbox
