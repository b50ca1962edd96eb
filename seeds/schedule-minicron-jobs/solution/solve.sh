#!/bin/bash
# minicron only takes numeric fields: weekdays are 1-5; "all days but the 1st" is day-of-month 2-31.
set -euo pipefail
cd /srv/minicron/jobs.d
sed -i 's/^schedule = .*/schedule = *\/15 9-17 * * 1-5/' report.job
printf 'schedule = 30 2 2-31 * *\ncommand = /app/bin/backup.sh\n' > backup.job
printf 'schedule = 0 0 1 * *\ncommand = /app/bin/cleanup.sh\n' > cleanup.job
echo 'enabled = false' >> legacy-sync.job
python3 /app/minicron.py check
