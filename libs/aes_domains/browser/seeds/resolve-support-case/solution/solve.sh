#!/bin/bash
# Through the browser: search the order, pick Marta Quiroga's case from the results (not the
# look-alikes), then assign, note and resolve it in one form submission.
set -euo pipefail
base=http://127.0.0.1:8000
page=$(browse "$base/cases" --fill '#q=QZ-418' --click '#search')
echo "$page"
case_id=$(grep ' Marta Quiroga ' <<<"$page" | grep -o 'CS-[0-9]*' | head -n1)
echo "case: $case_id"
out=$(browse "$base/cases/$case_id" --select '#assignee=Priya Nair (Billing)' \
    --fill '#note=Duplicate charge refunded, refund RF-20931.' --select '#status=Resolved' --click '#save')
echo "$out"
grep -q 'Case saved.' <<<"$out"
