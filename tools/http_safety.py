"""The SSRF guard (after OWASP's guidance): which URLs the scraper may fetch, and where.

Every address a host resolves to must be public; the caller connects to one of those
checked addresses with the name in the Host header and TLS SNI, so DNS rebinding fails.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

import httpx

from tools.errors import ScrapeError, UnsafeURLError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], Awaitable[list[str]]]
"""Turn a host name into the IP addresses (as strings) it resolves to."""

DEFAULT_PORTS = frozenset({80, 443})
_SCHEMES = {"http": 80, "https": 443}
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")
_NUMBER = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")


class _Verdict(NamedTuple):
    reason: str
    private_ok: bool  # may `allow_private` let it through?


_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "fd00:ec2::254",  # AWS IMDS over IPv6
    )
)


def _table(*rows: tuple[str, str, bool]) -> tuple[tuple[IPNetwork, _Verdict], ...]:
    return tuple((ipaddress.ip_network(net), _Verdict(reason, ok)) for net, reason, ok in rows)


# The IANA special-purpose registries; the first matching row gives the verdict. An explicit
# table, because `ipaddress.is_global` answers differently between Python releases.
_SPECIAL = _table(
    ("0.0.0.0/8", "unspecified", False),
    ("10.0.0.0/8", "private", True),
    ("100.64.0.0/10", "carrier-grade NAT", True),
    ("127.0.0.0/8", "loopback", True),
    ("169.254.0.0/16", "link-local", True),
    ("172.16.0.0/12", "private", True),
    ("192.0.0.0/24", "IETF protocol", True),
    ("192.0.2.0/24", "documentation", True),
    ("192.88.99.0/24", "6to4 relay", True),
    ("192.168.0.0/16", "private", True),
    ("198.18.0.0/15", "benchmarking", True),
    ("198.51.100.0/24", "documentation", True),
    ("203.0.113.0/24", "documentation", True),
    ("224.0.0.0/4", "multicast", False),
    ("255.255.255.255/32", "broadcast", False),
    ("240.0.0.0/4", "reserved", False),
    ("::/128", "unspecified", False),
    ("::1/128", "loopback", True),
    ("::/96", "IPv4-compatible", False),
    ("64:ff9b:1::/48", "local NAT64", True),
    ("100::/64", "discard-only", True),
    ("2001::/23", "IETF protocol", True),
    ("2001:db8::/32", "documentation", True),
    ("3fff::/20", "documentation", True),
    ("5f00::/16", "segment routing", True),
    ("fc00::/7", "unique local", True),
    ("fe80::/10", "link-local", True),
    ("fec0::/10", "site-local", True),
    ("ff00::/8", "multicast", False),
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")


def _unmapped(address: IPAddress) -> IPAddress:
    """Return the IPv4 address an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) stands for."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _verdict(address: IPAddress) -> _Verdict | None:
    """Say why an address is not public, or None if it is.

    NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`) addresses are judged by the IPv4
    address they embed.
    """
    address = _unmapped(address)
    if address in _METADATA:
        return _Verdict("cloud metadata", False)
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.sixtofour
        if address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            inner = _verdict(embedded)
            return _Verdict(f"{inner.reason} (embedded)", inner.private_ok) if inner else None
    for network, verdict in _SPECIAL:
        if address in network:
            return verdict
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST_V6:
        return _Verdict("reserved", False)
    return None


def check_address(
    address: IPAddress,
    *,
    allow_private: bool = False,
    allowed_networks: Collection[IPNetwork] = (),
) -> None:
    """Refuse an address we must not connect to.

    `allow_private` admits private, loopback and link-local ranges but never metadata
    endpoints, multicast, broadcast, reserved or unspecified addresses; `allowed_networks`
    admits exactly what it lists, metadata included.

    Raises:
        UnsafeURLError: The address is not public and no setting admits it.
    """
    address = _unmapped(address)
    if any(address in network for network in allowed_networks):
        return
    verdict = _verdict(address)
    if verdict is None or (allow_private and verdict.private_ok):
        return
    raise UnsafeURLError(f"refused: {verdict.reason} address")


def _ipv4_number(label: str) -> int:
    if label[:2].lower() == "0x":
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        return int(label, 8)
    return int(label, 10)


def _parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Read an IPv4 literal the way inet_aton does; None if the host is a name.

    `ipaddress` rejects `2130706433`, `0177.0.0.1`, `0x7f.1` and `127.1`, and
    `socket.inet_aton` differs between C libraries; `1.2.3.4.5` or `08.1` is refused.
    """
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()
    if not _NUMBER.fullmatch(labels[-1]):
        return None
    try:
        if len(labels) > 4 or not all(_NUMBER.fullmatch(label) for label in labels):
            raise ValueError(host)
        *head, last = (_ipv4_number(label) for label in labels)
        if any(part > 0xFF for part in head) or last >= 1 << (8 * (4 - len(head))):
            raise ValueError(host)
    except ValueError:
        raise UnsafeURLError("refused a malformed IP address") from None
    value = last
    for index, part in enumerate(head):
        value |= part << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def parse_host(host: str) -> IPAddress | None:
    """Return the address an IP-literal host denotes, or None for a host name.

    Raises:
        UnsafeURLError: The host looks like an IP address but is not a valid one.
    """
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.strip("[]"))
        except ValueError:
            raise UnsafeURLError("refused a malformed IP address") from None
    return _parse_ipv4(host)


async def resolve_host(host: str) -> list[str]:
    """Resolve a host name with the system resolver, without blocking the loop."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class SafeTarget:
    """A URL that passed the checks, with the addresses it may be fetched from."""

    url: httpx.URL  # to report and to resolve redirects against (no credentials)
    host: str  # the ASCII host name, or the normalised IP literal
    addresses: tuple[IPAddress, ...]  # all the host resolved to; each passed `check_address`
    is_literal: bool

    @property
    def host_header(self) -> str:
        """The Host header: the name (bracketed if IPv6) and any non-default port."""
        return self.url.netloc.decode("ascii")

    @property
    def sni_hostname(self) -> str | None:
        """The TLS server name; None when the URL names an IP address."""
        return None if self.is_literal else self.host

    @property
    def origin(self) -> str:
        """Scheme, host and port: the scope of robots.txt."""
        return f"{self.url.scheme}://{self.host_header}"

    def request_url(self, address: IPAddress) -> httpx.URL:
        """Return the URL to send, aimed at one checked address instead of the name."""
        return self.url.copy_with(host=str(address))


def _split(url: str) -> tuple[str, str, int | None, str, str]:
    """Split with urllib: `httpx.URL` refuses hosts like `0177.0.0.1` that resolvers accept."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeURLError("refused a malformed URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise UnsafeURLError(f"refused the scheme {scheme or '(none)'!r}: only http and https")
    host = (parts.hostname or "").lower()
    if not host:
        raise UnsafeURLError("refused a URL without a host")
    return scheme, host, port, parts.path, parts.query


async def check_url(
    url: str,
    *,
    resolver: Resolver = resolve_host,
    allow_private: bool = False,
    allowed_networks: Collection[IPNetwork] = (),
    allowed_ports: Collection[int] = DEFAULT_PORTS,
) -> SafeTarget:
    """Check a URL and resolve its host; every address must pass `check_address`.

    Credentials in the URL are dropped, never sent.

    Raises:
        UnsafeURLError: The scheme, port, host or any resolved address is refused.
        ScrapeError: The host name could not be resolved.
    """
    scheme, host, port, path, query = _split(url)
    if (port or _SCHEMES[scheme]) not in allowed_ports:
        raise UnsafeURLError(f"refused port {port or _SCHEMES[scheme]}: not an allowed port")
    literal = parse_host(host)
    if literal is not None:
        if isinstance(literal, ipaddress.IPv6Address) and literal.scope_id:
            raise UnsafeURLError("refused an IPv6 address with a zone")
        host = f"[{literal}]" if literal.version == 6 else str(literal)
    netloc = host if port is None else f"{host}:{port}"
    try:
        checked = httpx.URL(urlunsplit((scheme, netloc, path or "/", query, "")))
    except httpx.InvalidURL:
        raise UnsafeURLError("refused a malformed URL") from None
    name = checked.raw_host.decode("ascii")
    if literal is None and not _HOST_NAME.fullmatch(name):
        raise UnsafeURLError("refused a malformed host name")
    addresses = (literal,) if literal is not None else await _resolve(name, resolver)
    for address in addresses:
        check_address(address, allow_private=allow_private, allowed_networks=allowed_networks)
    return SafeTarget(checked, name, addresses, is_literal=literal is not None)


async def _resolve(host: str, resolver: Resolver) -> tuple[IPAddress, ...]:
    try:
        answers = await resolver(host)
    except OSError:
        answers = []
    if not answers:
        raise ScrapeError(f"could not resolve {host}")
    try:
        return tuple(ipaddress.ip_address(answer) for answer in answers)
    except ValueError:
        raise UnsafeURLError(f"refused a malformed address for {host}") from None
