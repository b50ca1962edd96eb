"""Checks ownership and modes under /srv/app, and what each user can actually do there."""

import grp
import pwd
import stat
import subprocess
from pathlib import Path

ROOT = Path("/srv/app")


def as_user(user: str, command: str) -> int:
    return subprocess.run(["runuser", "-u", user, "--", "sh", "-c", command], capture_output=True).returncode


def mode(path: str) -> int:
    return stat.S_IMODE((ROOT / path).stat().st_mode)


def test_everything_owned_by_appsvc_web():
    uid, gid = pwd.getpwnam("appsvc").pw_uid, grp.getgrnam("web").gr_gid
    for path in [ROOT, *ROOT.rglob("*")]:
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (uid, gid), path


def test_secret_key_owner_only():
    assert mode("config/secret.key") == 0o600
    assert as_user("appsvc", "cat /srv/app/config/secret.key") == 0
    assert as_user("deploy", "cat /srv/app/config/secret.key") != 0


def test_config_group_readable():
    assert mode("config") == 0o750 and mode("config/app.ini") == 0o640
    assert as_user("deploy", "cat /srv/app/config/app.ini") == 0
    assert as_user("guest", "cat /srv/app/config/app.ini") != 0


def test_scripts_executable_by_group_not_others():
    for script in ("bin/start.sh", "bin/stop.sh"):
        assert mode(script) == 0o750
    assert as_user("deploy", "/srv/app/bin/start.sh") == 0
    assert as_user("guest", "/srv/app/bin/start.sh") != 0


def test_uploads_setgid_group_writable():
    assert mode("uploads") == 0o2775
    assert as_user("deploy", "touch /srv/app/uploads/from-deploy") == 0
    created = ROOT / "uploads/from-deploy"
    try:
        assert created.stat().st_gid == grp.getgrnam("web").gr_gid
        assert as_user("guest", "touch /srv/app/uploads/from-guest") != 0
    finally:
        created.unlink()  # owned by deploy: would break the ownership check if it ran later


def test_public_world_readable():
    for path in (ROOT / "public").rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o755 if path.is_dir() else 0o644), path
    assert as_user("guest", "cat /srv/app/public/css/site.css") == 0


def test_nothing_world_writable():
    offenders = [p for p in [ROOT, *ROOT.rglob("*")] if not p.is_symlink() and p.stat().st_mode & stat.S_IWOTH]
    assert offenders == []
