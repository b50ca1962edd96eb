#!/bin/bash
# Valid sections and integers, an existing data dir, and a random owner-only token file.
set -euo pipefail
mkdir -p /var/lib/notes-api
umask 077
python3 -c 'import secrets; print(secrets.token_hex(16))' > /srv/notes-api/token
chmod 0600 /srv/notes-api/token
cat > /srv/notes-api/config.ini <<'INI'
[server]
host = 127.0.0.1
port = 8088

[storage]
data_dir = /var/lib/notes-api
max_note_bytes = 2048

[auth]
token_file = /srv/notes-api/token
INI
chmod 0644 /srv/notes-api/config.ini
