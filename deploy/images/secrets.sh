#!/usr/bin/env bash
# Write compose's secrets env file (default .aes/compose/secrets.env, mode 0600) unless it exists:
# the NATS credential (nats-server reads it from the environment into its config) and the S3 keys
# (MinIO's MINIO_ROOT_* names for the server, AES_S3_* for the services). Random per machine;
# never on a command line.
set -euo pipefail
FILE=${1:-.aes/compose/secrets.env}
[ -s "$FILE" ] && exit 0
mkdir -p "$(dirname "$FILE")"
umask 077
# One interpreter for all three. nats-server parses an expanded variable as a config value: one
# that starts with '-' or a digit is read as a number or a date and the server refuses to start
# (1 token in ~50); a letter first keeps the password a string.
read -r NATS_PASSWORD S3_ACCESS S3_SECRET < <(python3 -c \
  "import secrets as s; print('aes' + s.token_urlsafe(24), 'aes' + s.token_hex(6), s.token_urlsafe(30))")
cat > "$FILE" <<ENV
AES_NATS_USER=aes
AES_NATS_PASSWORD=$NATS_PASSWORD
AES_S3_ACCESS_KEY=$S3_ACCESS
AES_S3_SECRET_KEY=$S3_SECRET
MINIO_ROOT_USER=$S3_ACCESS
MINIO_ROOT_PASSWORD=$S3_SECRET
ENV
echo "secrets: wrote $FILE"
