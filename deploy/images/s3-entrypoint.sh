#!/bin/sh
# Local stand-in for MinIO (no registry here): SeaweedFS's S3 gateway (`weed mini`) on port 9000,
# started from MinIO's own command form `server DIR [flags]`, so compose.yaml's command fits
# both images; MinIO-only flags are ignored. Credentials come from the environment MinIO reads
# (MINIO_ROOT_USER / MINIO_ROOT_PASSWORD, from compose's env file) into an identity file that
# only this user can read: never onto a command line.
set -eu
[ "${1:-}" = server ] && [ -n "${2:-}" ] || { echo "usage: server DATA_DIR [MinIO flags, ignored]" >&2; exit 2; }
DATA=$2
: "${MINIO_ROOT_USER:?set MINIO_ROOT_USER (the S3 access key)}"
: "${MINIO_ROOT_PASSWORD:?set MINIO_ROOT_PASSWORD (the S3 secret key)}"
mkdir -p "$DATA/weed" "$DATA/tmp"
CONF=$DATA/tmp/s3-identities.json
umask 077
python3 - "$CONF" <<'PY'
import json, os, sys
ident = {"name": "aes", "credentials": [{"accessKey": os.environ["MINIO_ROOT_USER"],
                                         "secretKey": os.environ["MINIO_ROOT_PASSWORD"]}],
         "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
with open(sys.argv[1], "w") as f:
    json.dump({"identities": [ident]}, f)
PY
# weed writes scratch files to the temp dir: keep them on the data volume.
export TMPDIR=$DATA/tmp
cd "$DATA/weed"
exec weed -logtostderr mini -dir="$DATA/weed" -ip=127.0.0.1 -ip.bind=0.0.0.0 -s3.port=9000 \
  -s3.config="$CONF" -master.telemetry=false -webdav=false -admin.ui=false \
  -s3.port.iceberg=0 -s3.port.lance=0
