"""Checks ownership and modes under /srv/app, and what each user may do there (the kernel's
permission rule for a user's uid and groups, applied to every directory on the way: the tests
run unprivileged, so they cannot become each user)."""

import grp
import os
import pwd
import stat
from pathlib import Path

ROOT = Path("/srv/app")
READ, WRITE, EXEC = 4, 2, 1


def may(user: str, path: str, want: int) -> bool:
    """``user`` may read/write/execute ``path`` (``want``: READ, WRITE or EXEC bits)."""
    pw = pwd.getpwnam(user)
    groups = {pw.pw_gid, *(g.gr_gid for g in grp.getgrall() if user in g.gr_mem)}

    def bits(p: str) -> int:
        st = os.stat(p)
        shift = 6 if st.st_uid == pw.pw_uid else 3 if st.st_gid in groups else 0
        return (st.st_mode >> shift) & 7

    parents = Path(path).parents
    return all(bits(str(d)) & EXEC for d in parents) and bits(path) & want == want


def may_create_in(user: str, folder: str) -> bool:
    return may(user, folder, WRITE | EXEC)


def mode(path: str) -> int:
    return stat.S_IMODE((ROOT / path).stat().st_mode)


def test_everything_owned_by_appsvc_web():
    uid, gid = pwd.getpwnam("appsvc").pw_uid, grp.getgrnam("web").gr_gid
    for path in [ROOT, *ROOT.rglob("*")]:
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (uid, gid), path


def test_secret_key_owner_only():
    assert mode("config/secret.key") == 0o600
    assert may("appsvc", "/srv/app/config/secret.key", READ)
    assert not may("deploy", "/srv/app/config/secret.key", READ)


def test_config_group_readable():
    assert mode("config") == 0o750 and mode("config/app.ini") == 0o640
    assert may("deploy", "/srv/app/config/app.ini", READ)
    assert not may("guest", "/srv/app/config/app.ini", READ)


def test_scripts_executable_by_group_not_others():
    for script in ("bin/start.sh", "bin/stop.sh"):
        assert mode(script) == 0o750
    assert may("deploy", "/srv/app/bin/start.sh", READ | EXEC)
    assert not may("guest", "/srv/app/bin/start.sh", EXEC)


def test_uploads_setgid_group_writable():
    assert mode("uploads") == 0o2775  # the set-group-ID bit: new files belong to group web
    assert may_create_in("deploy", "/srv/app/uploads")
    assert not may_create_in("guest", "/srv/app/uploads")


def test_public_world_readable():
    for path in (ROOT / "public").rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o755 if path.is_dir() else 0o644), path
    assert may("guest", "/srv/app/public/css/site.css", READ)


def test_nothing_world_writable():
    offenders = [p for p in [ROOT, *ROOT.rglob("*")] if not p.is_symlink() and p.stat().st_mode & stat.S_IWOTH]
    assert offenders == []
