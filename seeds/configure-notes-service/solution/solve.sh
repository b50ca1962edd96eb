#!/bin/bash
# Valid sections and integers, an existing data dir, and a random owner-only token file.
set -euo pipefail
mkdir -p /var/lib/notes-api
umask 077
python3 -c 'import secrets; print(secrets.token_hex(16))' > /etc/notes-api/token
chmod 0600 /etc/notes-api/token
cat > /etc/notes-api/config.ini <<'INI'
[server]
host = 127.0.0.1
port = 8088

[storage]
data_dir = /var/lib/notes-api
max_note_bytes = 2048

[auth]
token_file = /etc/notes-api/token
INI
chmod 0644 /etc/notes-api/config.ini
