#!/usr/bin/env bash
# Install and start a Docker engine on a Debian machine (no systemd needed).
# Idempotent: does nothing when a daemon already answers.
set -euo pipefail
if docker info >/dev/null 2>&1; then echo "docker: engine already running"; exit 0; fi
if ! command -v dockerd >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
LOG=${AES_DOCKERD_LOG:-/var/log/aes-dockerd.log}
# dockerd does not autostart on these machines; run it detached from our session.
setsid nohup dockerd >"$LOG" 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && { echo "docker: engine ready"; exit 0; }
  sleep 0.5
done
echo "docker: engine failed to start; see $LOG" >&2
tail -20 "$LOG" >&2
exit 1
