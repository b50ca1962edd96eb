#!/usr/bin/env bash
# `docker compose down -v` for compose.yaml's project, then the sandbox containers its services
# started and could not remove themselves (a replica killed mid-check): those carry the label
# aes.owner_host = the hostname of the service container that started them, i.e. its short id.
# The sandbox reaper of a later replica cannot take them: it only reaps owners of its own host.
# Usage: compose-down.sh [docker compose options, e.g. -p NAME --env-file FILE]
set -euo pipefail
# Taking a stack down needs no credential: without the secrets file (`make clean` removed it),
# let compose parse the file with an empty one instead of refusing.
[ -f "${AES_SECRETS_FILE:-.aes/compose/secrets.env}" ] || export AES_SECRETS_FILE=/dev/null
HOSTS=$(docker compose "$@" ps -aq 2>/dev/null | cut -c1-12 || true)
docker compose "$@" down -v --remove-orphans
[ -n "$HOSTS" ] || exit 0
LEFT=$(docker ps -a --filter label=aes.managed=1 --format '{{.ID}} {{.Label "aes.owner_host"}}' \
       | awk 'NR==FNR {own[$1]=1; next} ($2 in own) {print $1}' <(echo "$HOSTS") -)
if [ -n "$LEFT" ]; then
  echo "compose-down: removing $(echo "$LEFT" | wc -l) sandbox container(s) left by killed replicas"
  docker rm -f $LEFT >/dev/null
fi
