#!/bin/bash
# Read Berlin Süd's stock page by page, compute each SKU's position from its open orders,
# and order ceil((target - position) / case_size) cases where position <= reorder point.
set -euo pipefail
wh=$(aes-call list_warehouses | jq -r '.[] | select(.name == "Berlin Süd") | .id')
pages=$(aes-call stock_levels warehouse="$wh" | jq .pages)
for page in $(seq 1 "$pages"); do
  aes-call stock_levels warehouse="$wh" page="$page" | jq -c '.items[]'
done | while read -r item; do
  sku=$(jq -r .sku <<<"$item")
  product=$(aes-call get_product sku="$sku")
  [ "$(jq .discontinued <<<"$product")" = false ] || continue
  size=$(jq .case_size <<<"$product")
  incoming=$(aes-call list_orders warehouse="$wh" sku="$sku" \
    | jq --argjson size "$size" '[.[] | select(.status == "open") | .cases * $size] | add // 0')
  position=$(( $(jq .on_hand <<<"$item") + incoming ))
  if [ "$position" -le "$(jq .reorder_point <<<"$item")" ]; then
    short=$(( $(jq .target_level <<<"$item") - position ))
    aes-call place_order "{\"warehouse\": \"$wh\", \"sku\": \"$sku\", \"cases\": $(( (short + size - 1) / size ))}" >/dev/null
  fi
done
