"""The SSRF guard, checked without connecting anywhere (names resolve from a table)."""

import ipaddress
import socket

import pytest

from tools.errors import ScrapeError, UnsafeURLError
from tools.http_safety import check_address, check_url, parse_host

ANSWERS = {
    "example.com": ["93.184.216.34"],
    "localhost": ["127.0.0.1", "::1"],
    "public-looking.example": ["127.0.0.1"],
    "mixed.example": ["93.184.216.34", "10.0.0.5"],
    "metadata.example": ["169.254.169.254"],
    "dual.example": ["2606:4700::1111", "93.184.216.34"],
}


async def table_resolver(host: str) -> list[str]:
    if host not in ANSWERS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return ANSWERS[host]


# (URL, why it is refused); names resolve through ANSWERS
UNSAFE_URLS = [
    ("http://127.0.0.1/", "loopback"),
    ("http://localhost/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://0/", "unspecified"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://[::]/", "unspecified"),
    ("http://user@127.0.0.1/", "loopback"),
    ("http://user:pw@10.0.0.1/", "private"),
    ("http://example.com\\@127.0.0.1/", "loopback"),
    ("http://10.1.2.3/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://0300.0250.1.1/", "private"),
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://0xA9FEA9FE/", "cloud metadata"),
    ("http://[::ffff:a9fe:a9fe]/", "cloud metadata"),
    ("http://100.100.100.200/", "cloud metadata"),
    ("http://192.0.0.192/", "cloud metadata"),
    ("http://[fd00:ec2::254]/", "cloud metadata"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "zone"),
    ("http://[fc00::1]/", "unique local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://[2001:db8::1]/", "documentation"),
    ("http://[::7f00:1]/", "IPv4-compatible"),
    ("http://[64:ff9b::7f00:1]/", "loopback \\(embedded\\)"),
    ("http://[64:ff9b::a9fe:a9fe]/", "cloud metadata"),
    ("http://[2002:7f00:1::]/", "loopback \\(embedded\\)"),
    ("http://[2002:a00:1::]/", "private"),
    ("http://127.0.0.1./", "loopback"),
    ("http://1.2.3.4.5/", "malformed IP"),
    ("http://256.1.1.1/", "malformed IP"),
    ("http://08.0.0.1/", "malformed IP"),
    ("https://127.0.0.1:443/", "loopback"),
    ("file:///etc/passwd", "scheme 'file'"),
    ("gopher://example.com/", "scheme 'gopher'"),
    ("ftp://example.com/", "scheme 'ftp'"),
    ("javascript:alert(1)", "scheme 'javascript'"),
    ("http:///no-host", "without a host"),
    ("http://example.com:22/", "port 22"),
    ("http://example.com:99999/", "malformed URL"),
    ("http://public-looking.example/", "loopback"),
    ("http://mixed.example/", "private"),
    ("http://metadata.example/", "cloud metadata"),
]


@pytest.mark.parametrize(("url", "reason"), UNSAFE_URLS)
async def test_unsafe_url_is_refused_for_its_reason(url: str, reason: str) -> None:
    with pytest.raises(UnsafeURLError, match=reason):
        await check_url(url, resolver=table_resolver)


def test_the_table_covers_at_least_thirty_urls() -> None:
    assert len({url for url, _ in UNSAFE_URLS}) >= 30


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "2606:4700::1111",
        "2a00:1450:4001:80b::200e",
        "::ffff:93.184.216.34",
        "64:ff9b::5db8:d822",
        "2002:5db8:d822::",
    ],
)
def test_public_address_passes(address: str) -> None:
    check_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7F000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("0300.0250.0.1", "192.168.0.1"),
        ("93.184.216.34.", "93.184.216.34"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
    ],
)
def test_odd_ip_spellings_are_read_as_addresses(host: str, expected: str) -> None:
    assert parse_host(host) == ipaddress.ip_address(expected)


@pytest.mark.parametrize("host", ["example.com", "0x7g.example", "1.2.3.example", "localhost."])
def test_host_names_are_not_addresses(host: str) -> None:
    assert parse_host(host) is None


@pytest.mark.parametrize(
    "host", ["1.2.3.4.5", "1.2.256.4", "1.2.3.256", "08.1", "4294967296", "1..1"]
)
def test_malformed_numeric_hosts_are_refused(host: str) -> None:
    with pytest.raises(UnsafeURLError):
        parse_host(host)


async def test_public_url_is_aimed_at_the_checked_address() -> None:
    target = await check_url("http://user:pw@example.com/a/b?q=1#top", resolver=table_resolver)
    assert str(target.url) == "http://example.com/a/b?q=1"
    assert target.addresses == (ipaddress.ip_address("93.184.216.34"),)
    assert str(target.request_url(target.addresses[0])) == "http://93.184.216.34/a/b?q=1"
    assert target.host_header == "example.com"
    assert target.sni_hostname == "example.com"


async def test_every_resolved_address_is_kept_for_the_connection() -> None:
    target = await check_url("https://dual.example:443/", resolver=table_resolver)
    assert [str(a) for a in target.addresses] == ["2606:4700::1111", "93.184.216.34"]
    assert str(target.request_url(target.addresses[0])) == "https://[2606:4700::1111]/"


async def test_odd_ip_spelling_is_sent_normalised_without_sni() -> None:
    target = await check_url("http://0x5d.0xb8.0xd8.0x22:8080/", allowed_ports={8080})
    assert str(target.url) == "http://93.184.216.34:8080/"
    assert target.host_header == "93.184.216.34:8080"
    assert target.sni_hostname is None


async def test_other_ports_pass_only_when_allowed() -> None:
    with pytest.raises(UnsafeURLError, match="port 8080"):
        await check_url("http://example.com:8080/", resolver=table_resolver)
    target = await check_url(
        "http://example.com:8080/", resolver=table_resolver, allowed_ports={8080}
    )
    assert target.origin == "http://example.com:8080"


def test_allow_private_admits_internal_addresses_but_never_metadata() -> None:
    for address in ["127.0.0.1", "10.1.2.3", "192.168.1.1", "::1", "fc00::1", "100.64.0.1"]:
        check_address(ipaddress.ip_address(address), allow_private=True)
    for address in ["169.254.169.254", "fd00:ec2::254", "0.0.0.0", "224.0.0.1", "240.0.0.1"]:
        with pytest.raises(UnsafeURLError):
            check_address(ipaddress.ip_address(address), allow_private=True)


def test_allowed_networks_admit_exactly_what_they_list() -> None:
    loopback = [ipaddress.ip_network("127.0.0.0/8")]
    check_address(ipaddress.ip_address("127.0.0.1"), allowed_networks=loopback)
    check_address(ipaddress.ip_address("::ffff:127.0.0.1"), allowed_networks=loopback)
    for address in ["10.0.0.1", "::1", "169.254.169.254"]:
        with pytest.raises(UnsafeURLError):
            check_address(ipaddress.ip_address(address), allowed_networks=loopback)
    metadata = [ipaddress.ip_network("169.254.169.254/32")]
    check_address(ipaddress.ip_address("169.254.169.254"), allowed_networks=metadata)


def test_refusal_names_the_kind_of_address() -> None:
    with pytest.raises(UnsafeURLError, match="cloud metadata"):
        check_address(ipaddress.ip_address("169.254.169.254"))
    with pytest.raises(UnsafeURLError, match="loopback"):
        check_address(ipaddress.ip_address("64:ff9b::7f00:1"))


async def test_unknown_host_is_a_scrape_error_not_a_refusal() -> None:
    with pytest.raises(ScrapeError, match="could not resolve") as caught:
        await check_url("http://nowhere.example/", resolver=table_resolver)
    assert not isinstance(caught.value, UnsafeURLError)


async def test_resolver_answering_garbage_is_refused() -> None:
    async def garbage(host: str) -> list[str]:
        return ["not-an-address"]

    with pytest.raises(UnsafeURLError):
        await check_url("http://example.com/", resolver=garbage)


async def test_system_resolver_sees_localhost_as_loopback() -> None:
    with pytest.raises(UnsafeURLError, match="loopback"):
        await check_url("http://localhost/")
