"""Checks the extracted ticket ids and IPv4 addresses against the digests shipped in /app/mail."""

from pathlib import Path

import pytest

TICKETS = [
    "INC-2020-30399", "INC-2020-77679", "INC-2020-93999", "INC-2020-99383", "INC-2021-79158",
    "INC-2022-33995", "INC-2022-70907", "INC-2022-82015", "INC-2022-83764", "INC-2023-01726",
    "INC-2023-08589", "INC-2023-17095", "INC-2023-30715", "INC-2023-51110", "INC-2023-62437",
    "INC-2024-01986", "INC-2024-08393", "INC-2024-19874",
]
IPS = [
    "0.0.0.0", "1.2.3.4", "8.8.8.8", "10.0.0.2", "10.0.0.10", "10.9.8.7", "10.20.30.40", "100.64.12.9",
    "172.16.5.4", "192.168.1.254", "198.51.100.23", "203.0.113.7", "255.255.255.255",
]


def lines(name: str) -> list[str]:
    path = Path("/app/out") / name
    assert path.exists(), f"{path} was not written"
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def test_every_ticket_found():
    assert set(TICKETS) <= set(lines("tickets.txt"))


@pytest.mark.parametrize("fake", ["INC-2023-0042", "INC-2023-00077", "INC-2023-00042", "INC-2023-000421"])
def test_no_look_alike_ticket(fake):
    # Fragments a loose pattern would pull out of XINC-..., INC-2023-00042a, INC-2023-000421, INC-2023-0042.
    assert fake not in lines("tickets.txt")


def test_tickets_sorted_and_distinct():
    assert lines("tickets.txt") == TICKETS


def test_every_ip_found():
    assert set(IPS) <= set(lines("ips.txt"))


@pytest.mark.parametrize(
    "fake", ["10.0.0.30", "10.0.0.300", "56.1.1.1", "256.1.1.1", "999.999.999.999", "192.168.001.1", "01.2.3.4"])
def test_no_invalid_ip(fake):
    # Invalid addresses in the digests, and the fragments a loose pattern would cut out of them.
    assert fake not in lines("ips.txt")


def test_ips_sorted_numerically_and_distinct():
    assert lines("ips.txt") == IPS
