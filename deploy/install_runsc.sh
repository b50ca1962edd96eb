#!/usr/bin/env bash
# Install gVisor's runsc and register it with the running Docker engine as the runtime "runsc"
# (AES_SANDBOX_RUNTIME=runsc runs every sandbox under it). Idempotent. The runtime is added to
# /etc/docker/daemon.json and loaded with SIGHUP (runtimes reload without a restart: running
# containers keep running). Its arguments: --network=none (on this machine kind gVisor's netstack
# does not start otherwise, and generated tasks have no network), --file-access=shared (the
# harness copies results into a running container through the engine; with gVisor's default
# exclusive access the sandbox never sees them, and the verifier finds no /app).
set -euo pipefail
if ! command -v runsc >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq runsc >/dev/null
fi
mkdir -p /etc/docker
changed=$(python3 - "$(command -v runsc)" <<'PY'
import json, os, sys
path = "/etc/docker/daemon.json"
conf = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else {}
want = {"path": sys.argv[1], "runtimeArgs": ["--network=none", "--file-access=shared"]}
if conf.get("runtimes", {}).get("runsc") != want:
    conf.setdefault("runtimes", {})["runsc"] = want
    with open(path + ".tmp", "w") as f:
        json.dump(conf, f, indent=2)
    os.replace(path + ".tmp", path)
    print("yes")
PY
)
[ -n "$changed" ] && pkill -HUP -x dockerd
for _ in $(seq 1 20); do
  docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && { echo "runsc: registered"; exit 0; }
  sleep 0.5
done
echo "runsc: dockerd did not load the runtime (see /etc/docker/daemon.json)" >&2
exit 1
