"""minicron: a tiny cron-like scheduler.

Job files: /srv/minicron/jobs.d/<name>.job (override the folder with $MINICRON_JOBS), lines ``key = value``:

    schedule = M H DOM MON DOW   five numeric cron fields: *, N, A-B, */S, A-B/S and comma lists;
                                 DOW 0-7 with 0 and 7 = Sunday; when DOM and DOW are both restricted
                                 a time matches if either does (as in cron)
    command  = shell command to run
    enabled  = true | false      (optional, default true)

Usage:
    minicron.py check                       validate every job file (exit 1 and list the problems)
    minicron.py simulate FROM TO            print "YYYY-MM-DDTHH:MM <name> <command>" for every run in [FROM, TO)
    minicron.py run                         run due jobs every minute (foreground)
"""

import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

FIELDS = [("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7)]


class JobError(ValueError):
    pass


def parse_field(text, name, lo, hi):
    values = set()
    for part in text.split(","):
        body, _, step = part.partition("/")
        if step and not step.isdigit():
            raise JobError(f"bad step in {name}: {part!r}")
        if body == "*":
            start, end = lo, hi
        elif "-" in body:
            a, _, b = body.partition("-")
            if not (a.isdigit() and b.isdigit()):
                raise JobError(f"bad range in {name}: {part!r}")
            start, end = int(a), int(b)
        elif body.isdigit():
            start = end = int(body)
            if step:
                end = hi
        else:
            raise JobError(f"bad value in {name}: {part!r}")
        if not lo <= start <= end <= hi:
            raise JobError(f"{name} out of range {lo}-{hi}: {part!r}")
        values.update(range(start, end + 1, int(step) if step else 1))
    return values


def parse_schedule(text):
    parts = text.split()
    if len(parts) != 5:
        raise JobError(f"schedule needs 5 fields, got {len(parts)}: {text!r}")
    sets = [parse_field(p, *f) for p, f in zip(parts, FIELDS)]
    if 7 in sets[4]:
        sets[4].add(0)
    restricted = (parts[2] != "*", parts[4] != "*")
    return sets, restricted


def load_job(path):
    job = {"name": path.stem, "enabled": "true"}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise JobError(f"{path.name}:{number}: expected 'key = value'")
        key = key.strip()
        if key not in ("schedule", "command", "enabled"):
            raise JobError(f"{path.name}:{number}: unknown key {key!r}")
        job[key] = value.strip()
    for key in ("schedule", "command"):
        if not job.get(key):
            raise JobError(f"{path.name}: missing {key}")
    if job["enabled"] not in ("true", "false"):
        raise JobError(f"{path.name}: enabled must be true or false")
    try:
        job["sets"], job["restricted"] = parse_schedule(job["schedule"])
    except JobError as e:
        raise JobError(f"{path.name}: {e}") from None
    return job


def load_jobs():
    folder = Path(os.environ.get("MINICRON_JOBS", "/srv/minicron/jobs.d"))
    jobs, problems = [], []
    for path in sorted(folder.glob("*.job")):
        try:
            jobs.append(load_job(path))
        except JobError as e:
            problems.append(str(e))
    return jobs, problems


def due(job, t):
    minute, hour, dom, month, dow = job["sets"]
    if t.minute not in minute or t.hour not in hour or t.month not in month:
        return False
    day_ok, week_ok = t.day in dom, (t.isoweekday() % 7) in dow
    if all(job["restricted"]):
        return day_ok or week_ok
    return day_ok and week_ok


def main(argv):
    if not argv or argv[0] not in ("check", "simulate", "run"):
        sys.exit(__doc__)
    jobs, problems = load_jobs()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    active = [j for j in jobs if j["enabled"] == "true"]
    if argv[0] == "check":
        print(f"{len(jobs)} jobs OK ({len(active)} enabled)")
    elif argv[0] == "simulate":
        t, end = (datetime.datetime.fromisoformat(a) for a in argv[1:3])
        while t < end:
            for job in active:
                if due(job, t):
                    print(f"{t:%Y-%m-%dT%H:%M} {job['name']} {job['command']}")
            t += datetime.timedelta(minutes=1)
    else:
        while True:
            now = datetime.datetime.now().replace(second=0, microsecond=0)
            for job in active:
                if due(job, now):
                    subprocess.Popen(["sh", "-c", job["command"]])
            time.sleep(60 - datetime.datetime.now().second)


if __name__ == "__main__":
    main(sys.argv[1:])
