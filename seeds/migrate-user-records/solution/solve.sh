#!/bin/bash
# Transform each v1 record; records that fail validation go to rejected.txt.
set -euo pipefail
python3 - <<'PY'
import datetime, json
from pathlib import Path

src, out = Path("/app/data/v1/users"), Path("/app/data/v2")
(out / "users").mkdir(parents=True, exist_ok=True)


def migrate(rec):
    first, last = rec["name"].rsplit(" ", 1)
    *street, place, country = [part.strip() for part in rec["address"].split(",")]
    postcode, city = place.split(" ", 1)
    roles = sorted({r.strip() for r in rec.get("roles", "").split(",") if r.strip()})
    return {
        "schema_version": 2, "id": f"user-{rec['id']:04d}", "first_name": first, "last_name": last,
        "email": rec["mail"].lower(),
        "signed_up": datetime.datetime.strptime(rec["signup"], "%m/%d/%Y").date().isoformat(),
        "phone": rec.get("phone"),
        "address": {"street": ", ".join(street), "postcode": postcode, "city": city, "country": country},
        "roles": roles, "active": rec["active"] == "yes",
    }


rejected, active = [], []
for path in sorted(src.glob("*.json")):
    try:
        user = migrate(json.loads(path.read_text()))
    except (KeyError, ValueError):
        rejected.append(path.name)
        continue
    (out / "users" / f"{user['id']}.json").write_text(json.dumps(user, indent=2, ensure_ascii=False))
    if user["active"]:
        active.append(user["id"])
(out / "rejected.txt").write_text("".join(f"{name}\n" for name in sorted(rejected)))
(out / "index.json").write_text(json.dumps(sorted(active), indent=2))
PY
