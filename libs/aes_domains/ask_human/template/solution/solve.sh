#!/bin/bash
set -euo pipefail
GREETING="welcome back"
CUSTOMER="Ada Lovelace"
echo "$GREETING, $CUSTOMER" > /app/greeting.txt
