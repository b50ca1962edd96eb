"""Checks /app/report.json against the figures of the three shipped log files."""

import json
from pathlib import Path

import pytest

REPORT = Path("/app/report.json")


@pytest.fixture(scope="module")
def report():
    assert REPORT.exists(), "/app/report.json was not written"
    return json.loads(REPORT.read_text())


def test_has_exactly_the_requested_keys(report):
    assert set(report) == {"total_requests", "status_counts", "top_paths", "top_error_ip", "bytes_total"}


def test_total_counts_all_files_and_skips_corrupt_lines(report):
    # 1162 valid lines: the gzipped file included, corrupt lines excluded.
    assert report["total_requests"] == 1162


def test_status_counts(report):
    assert report["status_counts"] == {
        "200": 674, "201": 71, "204": 38, "301": 37, "304": 81, "400": 53,
        "401": 35, "404": 77, "500": 45, "502": 29, "503": 22,
    }


def test_top_paths_ignore_query_strings(report):
    assert report["top_paths"] == ["/api/items", "/index.html", "/api/orders"]


def test_top_error_ip(report):
    assert report["top_error_ip"] == "10.0.7.77"


def test_bytes_total_treats_dash_as_zero(report):
    assert report["bytes_total"] == 23293327
