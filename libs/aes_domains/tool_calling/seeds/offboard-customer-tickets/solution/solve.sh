#!/bin/bash
# Find Acme Corp's id, walk every page of its tickets, then apply the policy per ticket.
set -euo pipefail
customer=$(aes-call list_customers | jq -r '.[] | select(.name == "Acme Corp") | .id')
pages=$(aes-call find_tickets customer="$customer" | jq .pages)
for page in $(seq 1 "$pages"); do
  aes-call find_tickets "{\"customer\": \"$customer\", \"page\": $page}" \
    | jq -r '.tickets[] | select(.status != "closed") | "\(.id) \(.tags | index("billing") != null)"'
done | while read -r id billing; do
  if [ "$billing" = true ]; then
    aes-call reassign ticket_id="$id" team=finance >/dev/null
    aes-call add_note "{\"ticket_id\": $id, \"text\": \"customer offboarded: billing follow-up\"}" >/dev/null
  else
    aes-call close_ticket ticket_id="$id" resolution=wont_fix note="customer offboarded" >/dev/null
  fi
done
