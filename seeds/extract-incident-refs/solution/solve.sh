#!/bin/bash
# Strict patterns with look-arounds so longer tokens (XINC-..., 1.2.3.4.5, 10.0.0.300) never half-match.
set -euo pipefail
mkdir -p /app/out
cat /app/mail/*.txt | grep -oP '(?<![A-Za-z0-9_-])INC-\d{4}-\d{5}(?![A-Za-z0-9_-])' | sort -u > /app/out/tickets.txt
octet='(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)'
cat /app/mail/*.txt \
  | grep -oP "(?<![\d.])(?:$octet\.){3}$octet(?!\d|\.\d)" \
  | sort -u | sort -t. -k1,1n -k2,2n -k3,3n -k4,4n > /app/out/ips.txt
