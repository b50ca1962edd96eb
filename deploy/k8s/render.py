"""Write the per-service manifests of deploy/k8s/base from the service registry.

    .venv/bin/python deploy/k8s/render.py          # rewrite base/services.yaml and base/scaledobjects.yaml
    .venv/bin/python deploy/k8s/render.py --check  # exit 1 when the committed files are stale

One Deployment per service of ``aes_services.registry.SERVICES`` (domain gates included), and one
KEDA ScaledObject per stateless service, whose stream and durable consumer are read from the
service class itself (``name`` is the durable, ``stream_for(subject)`` the stream), so a renamed
subject or a new gate cannot drift from what KEDA watches. tests/foundation/test_k8s.py fails when
the committed output differs from what this script writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from aes_lib.bus.streams import stream_for
from aes_services.registry import DOMAIN_GATES, SERVICES, SEPARATE_LEARNERS, SHARED_LEARNERS, TRAIN, service_class

BASE = Path(__file__).resolve().parent / "base"
NAMESPACE = "aes"
IMAGE = "autoenvscaling:0.1.0"
TRAIN_IMAGE = "autoenvscaling-train:0.1.0"
"""The image built with the ``train`` extra (torch), for ``registry.TRAIN`` and the model server."""
PART_OF = "autoenvscaling"

SANDBOX = ("validator", "strength", "attack", "reset", "calibrator", "proposer", "rollouts", "pool-review", *DOMAIN_GATES)
"""Services that start Docker sandboxes (compose's socket-mounting services, plus pool-review,
whose solver reruns run in sandboxes too, and every domain gate)."""
TRAINERS = tuple(n for n in (*SHARED_LEARNERS, *SEPARATE_LEARNERS) if n.startswith("learner"))
ORCHESTRATORS = tuple(n for n in (*SHARED_LEARNERS, *SEPARATE_LEARNERS) if n.startswith("orchestrator"))
STATEFUL = (*TRAINERS, *ORCHESTRATORS, "metrics")
"""One orchestrator and one trainer per policy: the batcher's pending groups and the optimizer live
in their processes, so a second replica would batch or train half the samples; one metrics process per run, which writes one run per tracking
backend. Fixed replicas, no autoscaling, Recreate rollouts."""

# KEDA reads consumer lag from the monitoring port of every server: the headless Service gives
# KEDA per-pod names (nats-0.nats-headless...) to ask the consumer's leader. The namespace is
# spelled out because kustomize's namespace transformer does not rewrite trigger metadata.
MONITORING = f"nats-headless.{NAMESPACE}.svc.cluster.local:8222"
DIND_IMAGE = "docker:28.1.1-dind-rootless"
DOCKER_HOST = "tcp://localhost:2375"


def labels(name: str, sandbox: bool) -> dict:
    out = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": PART_OF,
           "app.kubernetes.io/component": "service"}
    if sandbox:
        # Selects these pods for the gVisor overlay.
        out["aes.dev/sandbox"] = "dind"
    return out


def secret_env(var: str, secret: str, key: str) -> dict:
    return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


RESTRICTED = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
              "capabilities": {"drop": ["ALL"]}}


def service_resources(name: str, sandbox: bool) -> dict:
    if name in TRAINERS:
        return {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "8", "memory": "16Gi"}}
    if name in ORCHESTRATORS:  # holds the pending groups' tokenized samples
        return {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    if sandbox:
        return {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    return {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def dind_sidecar() -> dict:
    """Rootless Docker engine for this pod's sandboxes, started before the service (a native
    sidecar: an init container that keeps running).

    Documented exceptions to the restricted profile, all needed by dockerd-rootless:
    - privileged: true -- rootlesskit creates user, mount and network namespaces and mounts
      /proc and cgroups inside them, which the default seccomp/AppArmor profiles and the masked
      /proc forbid. Its processes still run as uid 1000 and the engine never gets host root;
      overlays/gvisor confines even these privileges to gVisor's user-space kernel.
    - readOnlyRootFilesystem: false -- the entrypoint writes its runtime files under /run/user
      and /home/rootless; image layers go to the emptyDir below.
    - capabilities are not dropped (privileged grants them in the pod's namespaces).
    No TLS: the engine listens on 2375 and is reachable only inside the pod, because the
    namespace's NetworkPolicies admit no ingress to service pods.
    """
    return {
        "name": "dind",
        "image": DIND_IMAGE,
        "restartPolicy": "Always",
        "env": [{"name": "DOCKER_TLS_CERTDIR", "value": ""}],
        "securityContext": {"privileged": True, "runAsUser": 1000, "runAsGroup": 1000,
                            "runAsNonRoot": True, "readOnlyRootFilesystem": False},
        "startupProbe": {"tcpSocket": {"port": 2375}, "periodSeconds": 2, "failureThreshold": 60},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "4Gi"},
                      "limits": {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "30Gi"}},
        "volumeMounts": [{"name": "docker-data", "mountPath": "/home/rootless/.local/share/docker"}],
    }


def deployment(name: str) -> dict:
    sandbox = name in SANDBOX
    env = [secret_env("AES_NATS_USER", "aes-nats", "user"),
           secret_env("AES_NATS_PASSWORD", "aes-nats", "password"),
           secret_env("AES_S3_ACCESS_KEY", "aes-minio", "user"),
           secret_env("AES_S3_SECRET_KEY", "aes-minio", "password")]
    volumes = [{"name": "aes-home", "emptyDir": {"sizeLimit": "20Gi"}},
               {"name": "tmp", "emptyDir": {"sizeLimit": "10Gi"}},
               {"name": "cache", "emptyDir": {"sizeLimit": "10Gi"}}]
    mounts = [{"name": "aes-home", "mountPath": "/var/lib/aes"},
              {"name": "tmp", "mountPath": "/tmp"},
              {"name": "cache", "mountPath": "/home/aes/.cache"}]
    if sandbox:
        env.append({"name": "DOCKER_HOST", "value": DOCKER_HOST})
        volumes.append({"name": "docker-data", "emptyDir": {"sizeLimit": "30Gi"}})
    container = {
        "name": "service",
        "image": TRAIN_IMAGE if name in TRAIN else IMAGE,
        "args": ["service", name],
        "envFrom": [{"configMapRef": {"name": "aes-settings"}}],
        "env": env,
        "resources": service_resources(name, sandbox),
        "securityContext": RESTRICTED,
        "volumeMounts": mounts,
    }
    pod = {
        "automountServiceAccountToken": False,
        # The runner drains the delivery in flight on SIGTERM (compose's stop_grace_period).
        "terminationGracePeriodSeconds": 60,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    if sandbox:
        pod["initContainers"] = [dind_sidecar()]
    spec = {
        "replicas": 0 if name in SEPARATE_LEARNERS else 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
        "template": {"metadata": {"labels": labels(name, sandbox)}, "spec": pod},
    }
    if name in STATEFUL:
        spec["strategy"] = {"type": "Recreate"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels(name, sandbox)}, "spec": spec}


def scaled_object(name: str) -> dict:
    cls = service_class(SERVICES[name])
    sandbox = name in SANDBOX
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "labels": labels(name, sandbox)},
        "spec": {
            "scaleTargetRef": {"name": name},
            # At least one replica: startup route checks want a consumer on every stage.
            "minReplicaCount": 1,
            "maxReplicaCount": 8 if sandbox else 4,
            "pollingInterval": 15,
            # Sandbox work takes minutes per message; scale down slowly.
            "cooldownPeriod": 600 if sandbox else 300,
            "triggers": [{"type": "nats-jetstream", "metadata": {
                "natsServerMonitoringEndpoint": MONITORING,
                "account": "$G",  # plain user/password auth: the global account
                "stream": stream_for(cls.subject),
                "consumer": cls.name,
                # Pending messages per replica: a sandbox stage handles one at a time.
                "lagThreshold": "2" if sandbox else "20",
            }}],
        },
    }


def dump(objects: list[dict]) -> str:
    head = "# Generated by deploy/k8s/render.py from aes_services.registry; do not edit.\n"
    return head + "".join("---\n" + yaml.safe_dump(o, sort_keys=False) for o in objects)


def outputs() -> dict[Path, str]:
    return {
        BASE / "services.yaml": dump([deployment(n) for n in SERVICES]),
        BASE / "scaledobjects.yaml": dump([scaled_object(n) for n in SERVICES if n not in STATEFUL]),
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in outputs().items():
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}; run deploy/k8s/render.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
