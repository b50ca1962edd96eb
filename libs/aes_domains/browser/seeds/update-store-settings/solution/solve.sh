#!/bin/bash
# Through the browser, in one submission: the four requested changes, plus the London support
# number rewritten in the international format the form now demands (+44, no leading 0).
set -euo pipefail
out=$(browse http://127.0.0.1:8000/settings \
    --fill '#support_email=support@fernhill-ceramics.eu' --select '#currency=Euro' \
    --fill '#low_stock_threshold=25' --check '#notify_orders' \
    --fill '#support_phone=+442079460958' --click '#save')
echo "$out"
grep -q 'Settings saved.' <<<"$out"
