"""deploy/k8s renders, every object is valid, and the manifests keep compose's guarantees.

No cluster and no network: a small subset of kustomize (resources, namespace, literal secret
generators, images, JSON6902 patches) renders the base and the overlays here; Kubernetes objects
are checked against the OpenAPI schemas bundled with ``kubernetes-validate``, KEDA's ScaledObject
(a CRD) against a schema written below from KEDA's documented fields. The NATS cluster is a Helm
chart, rendered only by `kustomize build --enable-helm`; its entry and values are checked as data.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
from collections import Counter
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from aes_lib.bus.streams import stream_for
from aes_services.registry import DOMAIN_GATES, SERVICES, TRAIN, service_class

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.33"
NAMESPACE = "aes"
STATEFUL = {"learner", "learner-solver", "learner-proposer", "orchestrator", "orchestrator-solver",
            "orchestrator-proposer", "metrics"}
SANDBOX = {"validator", "strength", "attack", "reset", "calibrator", "proposer", "rollouts", "pool-review", *DOMAIN_GATES}
CLUSTER_SCOPED = {"Namespace", "RuntimeClass"}

SCALED_OBJECT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "minLength": 1}, "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "spec": {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {"type": "object", "required": ["name"], "additionalProperties": False,
                                   "properties": {"name": {"type": "string", "minLength": 1},
                                                  "kind": {"type": "string"}, "apiVersion": {"type": "string"}}},
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "idleReplicaCount": {"type": "integer", "minimum": 0},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "triggers": {"type": "array", "minItems": 1, "items": {
                    "type": "object",
                    "required": ["type", "metadata"],
                    "properties": {
                        "type": {"const": "nats-jetstream"},
                        # KEDA's trigger metadata is a map of strings.
                        "metadata": {
                            "type": "object",
                            "required": ["natsServerMonitoringEndpoint", "account", "stream", "consumer",
                                         "lagThreshold"],
                            "additionalProperties": {"type": "string"},
                            "properties": {
                                "natsServerMonitoringEndpoint": {"type": "string", "pattern": r"^[a-z0-9.-]+:\d+$"},
                                "lagThreshold": {"type": "string", "pattern": r"^[1-9]\d*$"},
                                "activationLagThreshold": {"type": "string", "pattern": r"^\d+$"},
                                "useHttps": {"enum": ["true", "false"]},
                            },
                        },
                    },
                }},
            },
        },
    },
}


# --- a kustomize subset ---------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]


def _json6902(obj: dict, ops: list[dict]) -> None:
    for op in ops:
        *parents, last = _pointer(op["path"])
        node = obj
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if op["op"] == "replace":
            if isinstance(node, list):
                node[int(last)] = op["value"]
            else:
                assert last in node, f"replace of a missing path {op['path']}"  # kustomize fails too
                node[last] = op["value"]
        elif op["op"] == "add":
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else int(last), op["value"])
            else:
                node[last] = op["value"]
        elif op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        else:
            raise NotImplementedError(op["op"])


def _selected(obj: dict, target: dict) -> bool:
    if "kind" in target and obj["kind"] != target["kind"]:
        return False
    if "name" in target and obj["metadata"]["name"] != target["name"]:
        return False
    if "labelSelector" in target:
        labels = obj["metadata"].get("labels", {})
        for term in target["labelSelector"].split(","):
            key, _, value = term.partition("=")
            if labels.get(key.strip()) != value.strip():
                return False
    return True


def build(folder: Path) -> list[dict]:
    """What `kustomize build` prints for ``folder``, less the Helm chart (rendered only with
    --enable-helm) and less Secrets generated from files kept out of git."""
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    objs: list[dict] = []
    for res in k.get("resources", []):
        path = folder / res
        objs += build(path) if path.is_dir() else [o for o in yaml.safe_load_all(path.read_text()) if o]
    for gen in k.get("secretGenerator", []):
        if "literals" not in gen:
            continue  # envs files hold real credentials and are not committed
        data = dict(lit.split("=", 1) for lit in gen["literals"])
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": gen["name"]},
                  "data": {key: base64.b64encode(v.encode()).decode() for key, v in data.items()}}
        objs = [o for o in objs if not (o["kind"] == "Secret" and o["metadata"]["name"] == gen["name"])]
        objs.append(secret)
    if ns := k.get("namespace"):
        for o in objs:
            if o["kind"] not in CLUSTER_SCOPED:
                o["metadata"]["namespace"] = ns
    for img in k.get("images", []):
        for c in (c for o in objs for c in containers(o)):
            if c["image"].split(":")[0] == img["name"]:
                c["image"] = f"{img.get('newName', img['name'])}:{img['newTag']}"
    for patch in k.get("patches", []):
        hits = [o for o in objs if _selected(o, patch["target"])]
        assert hits, f"{folder.name}: patch target {patch['target']} matches nothing"
        for o in hits:
            _json6902(o, yaml.safe_load(patch["patch"]))
    return copy.deepcopy(objs)


def pod_spec(obj: dict) -> dict | None:
    if obj["kind"] in ("Deployment", "StatefulSet"):
        return obj["spec"]["template"]["spec"]
    return None


def containers(obj: dict) -> list[dict]:
    spec = pod_spec(obj)
    return [] if spec is None else spec.get("initContainers", []) + spec["containers"]


def index(objs: list[dict]) -> dict[tuple[str, str], dict]:
    out = {(o["kind"], o["metadata"]["name"]): o for o in objs}
    assert len(out) == len(objs), "two objects share a kind and name"
    return out


BASE = build(K8S / "base")
OVERLAYS = {name: build(K8S / "overlays" / name) for name in ("production", "gvisor")}


# --- tests ----------------------------------------------------------------------------------

def test_generated_manifests_match_the_generator() -> None:
    spec = importlib.util.spec_from_file_location("k8s_render", K8S / "render.py")
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    outputs = render.outputs()
    assert {p.name for p in outputs} == {"services.yaml", "scaledobjects.yaml"}
    for path, text in outputs.items():
        assert path.read_text() == text, f"{path.name} is stale: run deploy/k8s/render.py"


def test_base_has_exactly_the_expected_objects() -> None:
    scaled = len(SERVICES) - len(STATEFUL)
    assert Counter(o["kind"] for o in BASE) == Counter({
        "Namespace": 1, "ConfigMap": 1, "Secret": 2, "NetworkPolicy": 7, "Service": 4, "StatefulSet": 1,
        "Deployment": len(SERVICES) + 2,  # every service, the model engine, Jaeger
        "ScaledObject": scaled,
    })
    assert len(BASE) == 18 + len(SERVICES) + scaled
    assert all(o["metadata"].get("namespace") == NAMESPACE for o in BASE if o["kind"] != "Namespace")


@pytest.mark.parametrize("name", ["base", *OVERLAYS])
def test_every_object_validates(name: str) -> None:
    objs = BASE if name == "base" else OVERLAYS[name]
    for obj in objs:
        if obj["kind"] == "ScaledObject":
            jsonschema.validate(obj, SCALED_OBJECT)
            assert obj["spec"]["minReplicaCount"] <= obj["spec"]["maxReplicaCount"]
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_validation_catches_a_broken_object() -> None:
    # Guards the two checks above against passing anything.
    bad = copy.deepcopy(index(BASE)[("Deployment", "validator")])
    bad["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)
    so = copy.deepcopy(index(BASE)[("ScaledObject", "validator")])
    del so["spec"]["triggers"][0]["metadata"]["consumer"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(so, SCALED_OBJECT)


def test_every_service_has_a_deployment_and_stateless_ones_a_scaler_on_their_consumer() -> None:
    objs = index(BASE)
    for name, spec in SERVICES.items():
        cls = service_class(spec)
        dep = objs[("Deployment", name)]
        [service] = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "service"]
        assert service["args"] == ["service", name]
        assert service["envFrom"] == [{"configMapRef": {"name": "aes-settings"}}]
        scaler = objs.get(("ScaledObject", name))
        if name in STATEFUL:
            assert scaler is None, f"{name} keeps its training state in the process: it must not autoscale"
            assert dep["spec"]["replicas"] <= 1 and dep["spec"]["strategy"]["type"] == "Recreate"
            continue
        assert scaler is not None, f"{name} has no ScaledObject"
        assert scaler["spec"]["scaleTargetRef"]["name"] == name
        [trigger] = scaler["spec"]["triggers"]
        meta = trigger["metadata"]
        assert meta["stream"] == stream_for(cls.subject), name
        assert meta["consumer"] == cls.name, name
        assert meta["natsServerMonitoringEndpoint"] == f"nats-headless.{NAMESPACE}.svc.cluster.local:8222"
        assert meta["account"] == "$G"


def test_no_pod_reaches_the_host_docker_engine() -> None:
    for obj in [*BASE, *(o for objs in OVERLAYS.values() for o in objs)]:
        spec = pod_spec(obj)
        if spec is None:
            continue
        assert not any("hostPath" in v for v in spec.get("volumes", [])), obj["metadata"]["name"]
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
        for c in containers(obj):
            assert not any("docker.sock" in m["mountPath"] for m in c.get("volumeMounts", []))
            for env in c.get("env", []):
                if env["name"] == "DOCKER_HOST":
                    assert env["value"] == "tcp://localhost:2375", "only the pod's own engine"


def test_sandbox_services_get_a_rootless_dind_sidecar_and_no_others() -> None:
    for obj in BASE:
        if obj["kind"] != "Deployment":
            continue
        spec = pod_spec(obj)
        name = obj["metadata"]["name"]
        dind = [c for c in spec.get("initContainers", []) if c["name"] == "dind"]
        env = {e["name"] for c in spec["containers"] for e in c.get("env", [])}
        if name in SANDBOX:
            [side] = dind
            assert side["image"].startswith("docker:") and side["image"].endswith("-dind-rootless")
            assert side["image"].split(":")[1][0].isdigit(), "pinned engine version"
            assert side["restartPolicy"] == "Always"  # a native sidecar, up before the service
            assert side["securityContext"]["runAsNonRoot"] and side["securityContext"]["runAsUser"] != 0
            assert "DOCKER_HOST" in env
            assert obj["spec"]["template"]["metadata"]["labels"]["aes.dev/sandbox"] == "dind"
        else:
            assert not dind and "DOCKER_HOST" not in env, name


def test_every_container_has_limits_and_a_tight_security_context() -> None:
    for obj in BASE:
        spec = pod_spec(obj)
        if spec is None:
            continue
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec.get("automountServiceAccountToken") is False
        for c in containers(obj):
            where = f"{obj['metadata']['name']}/{c['name']}"
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), where
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), where
            assert ":" in c["image"] and not c["image"].endswith(":latest"), where
            sc = c["securityContext"]
            if c["name"] == "dind":
                continue  # the documented exceptions (render.py, dind_sidecar)
            assert sc["allowPrivilegeEscalation"] is False and not sc.get("privileged"), where
            assert sc["capabilities"]["drop"] == ["ALL"] and sc["readOnlyRootFilesystem"] is True, where


def test_network_policy_denies_by_default_and_services_reach_only_the_infrastructure() -> None:
    objs = index(BASE)
    deny = objs[("NetworkPolicy", "default-deny")]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny
    egress = objs[("NetworkPolicy", "services-egress")]["spec"]
    targets = {(rule["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"], rule["ports"][0]["port"])
               for rule in egress["egress"]}
    assert targets == {("nats", 4222), ("minio", 9000), ("jaeger", 4318), ("model", 8080)}
    for rule in egress["egress"]:
        assert all(set(peer) == {"podSelector"} for peer in rule["to"]), "no namespace or IP block"
    # Every other egress rule in the namespace stays in the cluster (no ipBlock anywhere).
    for o in BASE:
        if o["kind"] == "NetworkPolicy":
            for rule in o["spec"].get("egress", []):
                assert rule.get("to") and all("ipBlock" not in peer for peer in rule["to"])


def test_references_resolve() -> None:
    objs = index(BASE)
    for obj in BASE:
        for c in containers(obj):
            for src in c.get("envFrom", []):
                assert ("ConfigMap", src["configMapRef"]["name"]) in objs
            for env in c.get("env", []):
                if ref := env.get("valueFrom", {}).get("secretKeyRef"):
                    secret = objs[("Secret", ref["name"])]
                    assert ref["key"] in secret["data"]
    settings = objs[("ConfigMap", "aes-settings")]["data"]
    assert settings["AES_NATS_URL"] == "nats://nats:4222" and settings["AES_STREAM_REPLICAS"] == "3"
    assert settings["AES_BLOB_URL"] == "s3://aes?endpoint=minio:9000&secure=0"
    assert settings["AES_OTLP_ENDPOINT"] == "http://jaeger:4318"
    assert settings["AES_MODEL_URL"] == "http://model:8080/v1"
    assert not any(k.endswith(("PASSWORD", "SECRET_KEY", "API_KEY")) for k in settings), "secrets in a ConfigMap"
    minio = objs[("StatefulSet", "minio")]
    assert minio["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "quay.io/minio/minio:RELEASE.2025-04-22T22-12-26Z"
    assert minio["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


def test_nats_comes_from_the_pinned_chart_as_a_jetstream_cluster_with_auth() -> None:
    k = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    [chart] = k["helmCharts"]
    assert chart["repo"] == "https://nats-io.github.io/k8s/helm/charts/" and chart["name"] == "nats"
    assert chart["version"].count(".") == 2 and chart["version"][0].isdigit()
    assert chart["releaseName"] == "nats" and chart["namespace"] == NAMESPACE
    values = yaml.safe_load((K8S / "base" / chart["valuesFile"]).read_text())
    assert values["fullnameOverride"] == "nats"
    assert values["config"]["cluster"] == {"enabled": True, "replicas": 3}
    assert values["config"]["jetstream"]["enabled"] and values["config"]["jetstream"]["fileStore"]["enabled"]
    assert values["config"]["jetstream"]["fileStore"]["pvc"]["enabled"]
    assert values["config"]["monitor"] == {"enabled": True, "port": 8222}
    auth = values["config"]["merge"]["authorization"]
    assert auth == {"user": "<< $NATS_USER >>", "password": "<< $NATS_PASSWORD >>"}
    for var in ("NATS_USER", "NATS_PASSWORD"):
        assert values["container"]["env"][var]["valueFrom"]["secretKeyRef"]["name"] == "aes-nats"
    assert values["container"]["resources"]["limits"]


def test_production_overlay_pins_the_image_and_widens_bounds() -> None:
    prod = index(OVERLAYS["production"])
    base = index(BASE)
    images = {c["image"] for o in prod.values() for c in containers(o) if "autoenvscaling" in c["image"]}
    assert images == {"registry.example.com/autoenvscaling:0.1.0", "registry.example.com/autoenvscaling-train:0.1.0"}
    # Only the training services and the model server carry torch (the train extra).
    train = {key[1] for key, o in prod.items() if any(c["image"].endswith("-train:0.1.0") for c in containers(o))}
    assert train == {*TRAIN, "model"}, train
    for name in ("validator", "calibrator", "rollouts"):
        assert prod[("ScaledObject", name)]["spec"]["maxReplicaCount"] > \
            base[("ScaledObject", name)]["spec"]["maxReplicaCount"]
    k = yaml.safe_load((K8S / "overlays" / "production" / "kustomization.yaml").read_text())
    assert all(g["behavior"] == "replace" and "literals" not in g for g in k["secretGenerator"])


def test_gvisor_overlay_moves_exactly_the_sandbox_pods() -> None:
    objs = index(OVERLAYS["gvisor"])
    assert objs[("RuntimeClass", "gvisor")]["handler"] == "runsc"
    for (kind, name), obj in objs.items():
        if kind in ("Deployment", "StatefulSet"):
            expected = "gvisor" if name in SANDBOX else None
            assert pod_spec(obj).get("runtimeClassName") == expected, name
