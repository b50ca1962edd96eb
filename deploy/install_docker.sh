#!/usr/bin/env bash
# Install and start a Docker engine on a Debian machine (no systemd needed).
# Idempotent: does nothing when a daemon already answers.
set -euo pipefail

# The compose v2 plugin (`make compose-up`, tests/compose) is not packaged for Debian 12: take
# trixie's `docker-compose` deb from the same mirror, through a throw-away sources list (the
# machine's own apt sources stay bookworm-only). The plugin is a Go binary that needs only libc
# (2.26.1-4 declares libc6 >= 2.34; bookworm has 2.36); --force-depends keeps a later revision's
# stricter pin from blocking it.
install_compose() {
  docker compose version >/dev/null 2>&1 && return 0
  [ -x /usr/libexec/docker/cli-plugins/docker-compose ] && return 0  # no client yet: docker.io brings one
  local mirror tmp
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  tmp=$(mktemp -d)
  echo "deb $mirror trixie main" > "$tmp/trixie.list"
  local opts=(-o Dir::Etc::sourcelist="$tmp/trixie.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$tmp/lists"
              -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=  # leave the system's caches alone
              -o APT::Sandbox::User=root)  # the private temp dir is root's only
  mkdir -p "$tmp/lists/partial"
  apt-get "${opts[@]}" update -qq
  (cd "$tmp" && apt-get "${opts[@]}" download -qq docker-compose)
  dpkg -i --force-depends "$tmp"/docker-compose_*.deb >/dev/null
  rm -rf "$tmp"
  [ -x /usr/libexec/docker/cli-plugins/docker-compose ] || { echo "docker: compose plugin did not install" >&2; return 1; }
  echo "docker: compose plugin installed"
}
install_compose

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
