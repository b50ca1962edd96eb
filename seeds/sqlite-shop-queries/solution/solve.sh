#!/bin/bash
# The reference queries live next to this script; install them and smoke-run each one.
set -euo pipefail
mkdir -p /app/queries
cp "$(dirname "$0")"/queries/q*.sql /app/queries/
for q in /app/queries/q*.sql; do sqlite3 /app/shop.db < "$q" > /dev/null; done
