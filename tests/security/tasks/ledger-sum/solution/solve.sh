#!/bin/bash
set -euo pipefail
cat > /app/solve <<'PY'
#!/usr/bin/env python3
print(sum(int(line) for line in open("/app/ledger.txt") if line.strip()))
PY
chmod 755 /app/solve
/app/solve > /app/answer.txt
