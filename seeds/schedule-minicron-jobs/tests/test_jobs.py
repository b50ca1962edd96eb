"""Simulates the configured jobs with a pristine copy of minicron (shipped with these tests) over July 2024."""

import collections
import datetime
import subprocess
import sys
from pathlib import Path

import pytest

# The programs the tests start cannot read /tests: the pristine copy goes to them as its source.
MINICRON = (Path(__file__).parent / "minicron.py").read_text()
JOBS = Path("/srv/minicron/jobs.d")
START, END = "2024-07-01T00:00", "2024-08-03T00:00"


def minicron(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-c", MINICRON, *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def runs():
    result = minicron("simulate", START, END)
    assert result.returncode == 0, result.stderr
    by_job = collections.defaultdict(list)
    for line in result.stdout.splitlines():
        stamp, name, command = line.split(" ", 2)
        by_job[name].append((datetime.datetime.fromisoformat(stamp), command))
    return by_job


def test_check_passes():
    result = minicron("check")
    assert result.returncode == 0, result.stderr


def test_exactly_the_four_jobs():
    assert sorted(p.stem for p in JOBS.glob("*.job")) == ["backup", "cleanup", "legacy-sync", "report"]


def test_report_every_quarter_hour_on_weekdays(runs):
    times = [t for t, _ in runs["report"]]
    assert {c for _, c in runs["report"]} == {"/app/bin/report.sh"}
    assert all(t.weekday() < 5 and t.minute % 15 == 0 and 9 <= t.hour <= 17 for t in times)
    per_day = collections.Counter(t.date() for t in times)
    weekdays = [d for d in (datetime.date(2024, 7, 1) + datetime.timedelta(n) for n in range(33)) if d.weekday() < 5]
    assert per_day == {d: 36 for d in weekdays}


def test_backup_daily_except_first_of_month(runs):
    assert {c for _, c in runs["backup"]} == {"/app/bin/backup.sh"}
    assert all((t.hour, t.minute) == (2, 30) for t, _ in runs["backup"])
    days = [t.date() for t, _ in runs["backup"]]
    expected = [datetime.date(2024, 7, 1) + datetime.timedelta(n) for n in range(33)]
    assert days == [d for d in expected if d.day != 1]


def test_cleanup_first_of_month_at_midnight(runs):
    assert runs["cleanup"] == [(datetime.datetime(2024, 7, 1), "/app/bin/cleanup.sh"),
                               (datetime.datetime(2024, 8, 1), "/app/bin/cleanup.sh")]


def test_legacy_sync_disabled_but_kept(runs):
    sys.path.insert(0, str(Path(__file__).parent))
    import minicron as pristine

    job = pristine.load_job(JOBS / "legacy-sync.job")
    assert (job["schedule"], job["command"], job["enabled"]) == ("*/5 * * * *", "/app/bin/legacy-sync.sh", "false")
    assert "legacy-sync" not in runs
