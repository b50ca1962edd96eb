"""Drives the repaired Makefile on a fresh copy of /app/site for every check."""

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

PAGES = ["about", "contact", "pricing"]


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    shutil.copytree("/app/site", root, symlinks=True)
    shutil.rmtree(root / "build", ignore_errors=True)
    shutil.rmtree(root / "dist", ignore_errors=True)
    return root


def make(site: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(["make", *args], cwd=site, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def bump(site: Path, path: Path, text: str) -> None:
    # Append and move the mtime well past the outputs', so make's timestamp check sees the edit.
    path.write_text(path.read_text() + text)
    later = max(p.stat().st_mtime for p in site.rglob("*") if p.is_file()) + 10
    os.utime(path, (later, later))


def outputs(site: Path) -> dict[str, float]:
    return {str(p.relative_to(site)): p.stat().st_mtime_ns for p in site.glob("build/*.html")} | {
        "dist": (site / "dist/site.tar.gz").stat().st_mtime_ns}


def test_default_build_renders_pages_and_index(site):
    make(site)
    for page in PAGES:
        assert "<h1>" in (site / f"build/{page}.html").read_text()
    index = (site / "build/index.html").read_text()
    assert all(f'href="{page}.html"' in index for page in PAGES)


def test_archive_contains_index_and_pages(site):
    make(site)
    with tarfile.open(site / "dist/site.tar.gz") as tar:
        names = {os.path.normpath(n) for n in tar.getnames()}
    assert {"index.html", *(f"{p}.html" for p in PAGES)} <= names


def test_new_page_is_built_indexed_and_packed(site):
    (site / "src/pages/jobs.md").write_text("# Jobs\n\nWe are hiring.\n")
    make(site)
    assert "<h1>Jobs</h1>" in (site / "build/jobs.html").read_text()
    assert 'href="jobs.html"' in (site / "build/index.html").read_text()
    with tarfile.open(site / "dist/site.tar.gz") as tar:
        assert "jobs.html" in {os.path.normpath(n) for n in tar.getnames()}


def test_template_edit_rerenders_every_page(site):
    make(site)
    bump(site, site / "templates/page.html", "<!-- footer v2 -->\n")
    make(site)
    for page in PAGES:
        assert "footer v2" in (site / f"build/{page}.html").read_text()


def test_page_edit_rebuilds_index_and_archive(site):
    make(site)
    page = site / "src/pages/contact.md"
    page.write_text(page.read_text().replace("# Contact", "# Contact and support"))
    bump(site, page, "\nOpen on weekdays.\n")
    make(site)
    assert "Contact and support" in (site / "build/index.html").read_text()
    with tarfile.open(site / "dist/site.tar.gz") as tar:
        member = next(m for m in tar.getmembers() if os.path.normpath(m.name) == "contact.html")
        assert b"Open on weekdays." in tar.extractfile(member).read()


def test_second_make_rebuilds_nothing(site):
    make(site)
    before = outputs(site)
    make(site)
    assert outputs(site) == before


def test_clean_removes_outputs_only(site):
    make(site)
    make(site, "clean")
    assert not (site / "build").exists() and not (site / "dist").exists()
    assert (site / "clean").read_text().startswith("This file is a note")
    assert (site / "src/pages/about.md").exists()
