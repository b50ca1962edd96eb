#!/bin/bash
# Parse every rotated log (decompressing the .gz one), skip malformed lines, aggregate.
set -euo pipefail
cd /app/logs
{ zcat access.log.2.gz; cat access.log.1 access.log; } | python3 -c '
import collections, json, re, sys
line_re = re.compile(r"^(\S+) \S+ \S+ \[[^\]]+\] \"[A-Z]+ (\S+) [^\"]*\" (\d{3}) (\d+|-) ")
total, size = 0, 0
status, paths, errors = collections.Counter(), collections.Counter(), collections.Counter()
for line in sys.stdin:
    m = line_re.match(line)
    if not m:
        continue
    ip, path, code, nbytes = m.groups()
    total += 1
    status[code] += 1
    paths[path.split("?")[0]] += 1
    if code.startswith("5"):
        errors[ip] += 1
    size += 0 if nbytes == "-" else int(nbytes)
top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
report = {"total_requests": total, "status_counts": dict(status), "top_paths": [p for p, _ in top],
          "top_error_ip": errors.most_common(1)[0][0], "bytes_total": size}
json.dump(report, open("/app/report.json", "w"), indent=2)
'
