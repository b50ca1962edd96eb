#!/bin/bash
# Build the task's repository with fixed identities and dates so every commit id is reproducible.
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Dev" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Dev" GIT_COMMITTER_EMAIL="dana@example.com"
day=0
commit() {
  day=$((day + 1))
  export GIT_AUTHOR_DATE="2024-02-0${day}T10:00:00+00:00" GIT_COMMITTER_DATE="2024-02-0${day}T10:00:00+00:00"
  git add -A && git commit -q -m "$1"
}
git init -q -b main /app/repo && cd /app/repo
printf '# shopfront\n\nA tiny storefront backend.\n' > README.md
printf 'from settings import PAYMENT_API_KEY\n\n\ndef checkout(total):\n    return {"total": total, "key_set": bool(PAYMENT_API_KEY)}\n' > app.py
printf 'PAYMENT_API_KEY = ""\nCURRENCY = "EUR"\n' > settings.py
commit "initial app skeleton"
printf 'import json\n\n\ndef load(path):\n    with open(path) as f:\n        return json.load(f)\n' > config.py
commit "add config loader"
printf 'PAYMENT_API_KEY = "sk_live_4f9a2c7e1b8d3a6f5e0c9b7a"\nCURRENCY = "EUR"\n' > settings.py
commit "wire payment client"
git tag v0.1
mkdir -p tests && printf 'from app import checkout\n\n\ndef test_checkout():\n    assert checkout(3)["total"] == 3\n' > tests/test_app.py
commit "add checkout test"
git branch feature/reports
printf 'import os\n\nPAYMENT_API_KEY = os.environ.get("PAYMENT_API_KEY", "")\nCURRENCY = "EUR"\n' > settings.py
commit "read payment key from the environment"
printf '\n## Deploying\n\nSet PAYMENT_API_KEY in the environment.\n' >> README.md
commit "docs: deployment notes"
git checkout -q feature/reports
printf 'def monthly(orders):\n    return sum(o["total"] for o in orders)\n' > reports.py
commit "add monthly report"
git checkout -q main
