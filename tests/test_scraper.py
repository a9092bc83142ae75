"""The scraper against a real site on loopback: uvicorn serving Starlette in a thread."""

import asyncio
import gzip
import shutil
import socket
import ssl
import subprocess
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tools import extraction
from tools.errors import ScrapeError, UnsafeURLError
from tools.scraper import USER_AGENT, FetchPolicy, Scraper, extract_main_text, fetch_page

from .servers import serve_port

SITE = Path(__file__).parent / "fixtures" / "site"
ARTICLE_TITLE = "How the printing press changed Europe"
CHUNK = b"<p>" + b"x" * (64 * 1024 - 3)
ENDLESS_CHUNKS = 16 * 1024  # 1 GiB if nobody stops reading


@dataclass
class SiteLog:
    """What the site saw; written on the server's thread, read by the tests."""

    robots: Counter[str] = field(default_factory=Counter)
    in_flight: Counter[str] = field(default_factory=Counter)
    most_in_flight: Counter[str] = field(default_factory=Counter)
    chunks_sent: int = 0
    stream_closed: threading.Event = field(default_factory=threading.Event)


def host_name(request: Request) -> str:
    return request.headers["host"].rsplit(":", 1)[0]


async def until_disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class EndlessPage:
    """Streams HTML without Content-Length until the client hangs up."""

    def __init__(self, log: SiteLog) -> None:
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hung_up = asyncio.Event()

        async def watch() -> None:
            await until_disconnected(receive)
            hung_up.set()

        watcher = asyncio.create_task(watch())
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/html")],
            }
        )
        try:
            while not hung_up.is_set() and self.log.chunks_sent < ENDLESS_CHUNKS:
                await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
                self.log.chunks_sent += 1
                await asyncio.sleep(0)  # let the watcher notice a hang-up
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            self.log.stream_closed.set()


def build_site(log: SiteLog) -> Starlette:
    article = (SITE / "article.html").read_bytes()

    async def robots(request: Request) -> Response:
        host = host_name(request)
        log.robots[host] += 1
        if host.startswith("robots-missing."):
            return PlainTextResponse("no such file", status_code=404)
        if host.startswith("robots-broken."):
            return PlainTextResponse("server error", status_code=500)
        if host.startswith("robots-slow."):
            await until_disconnected(request.receive)
        return FileResponse(SITE / "robots.txt", media_type="text/plain")

    async def redirect(request: Request) -> Response:
        hops = int(request.path_params["hops"])
        return RedirectResponse(f"/redirect/{hops - 1}" if hops > 1 else "/article", 302)

    async def redirect_elsewhere(request: Request) -> Response:
        return RedirectResponse(request.query_params["to"], 302)

    padded = article.replace(b"</article>", b"<p>" + b"filler " * 100_000 + b"</p></article>")
    encoded_bodies = {
        "gzip": gzip.compress(article),
        "deflate": zlib.compress(article),
        "gzip-bomb": gzip.compress(padded),  # 700 KB of HTML in about 2 KB
        "zstd": b"\x28\xb5\x2f\xfd",
    }

    async def encoded(request: Request) -> Response:
        coding = request.path_params["coding"]
        headers = {"content-encoding": coding.removesuffix("-bomb")}
        return Response(encoded_bodies[coding], media_type="text/html", headers=headers)

    async def latin1(request: Request) -> Response:
        html = "<html><head><title>Café</title></head><body><p>Un café crème.</p></body></html>"
        return Response(html.encode("latin-1"), media_type="text/html; charset=ISO-8859-1")

    async def slow(request: Request) -> Response:
        key = request.path_params["key"]
        log.in_flight[key] += 1
        log.most_in_flight[key] = max(log.most_in_flight[key], log.in_flight[key])
        await asyncio.sleep(0.05)  # long enough for requests to overlap if allowed to
        log.in_flight[key] -= 1
        return PlainTextResponse("done")

    async def hang(request: Request) -> Response:
        await until_disconnected(request.receive)
        return PlainTextResponse("too late")

    routes = [
        Route("/robots.txt", robots),
        Route("/article", lambda r: Response(article, media_type="text/html")),
        Route("/private/secret", lambda r: Response(article, media_type="text/html")),
        Route("/plain.txt", lambda r: FileResponse(SITE / "plain.txt", media_type="text/plain")),
        Route("/latin1", latin1),
        Route("/redirect/{hops:int}", redirect),
        Route("/elsewhere", redirect_elsewhere),
        Route("/encoded/{coding}", encoded),
        Route("/endless", EndlessPage(log)),
        Route("/large", lambda r: Response(b"x" * 2_000_000, media_type="text/html")),
        Route("/doc.pdf", lambda r: Response(b"%PDF-1.7", media_type="application/pdf")),
        Route("/image.png", lambda r: Response(b"\x89PNG", media_type="image/png")),
        Route("/missing", lambda r: PlainTextResponse("gone", status_code=404)),
        Route("/slow/{key}", slow),
        Route("/hang", hang),
        Route("/user-agent", lambda r: PlainTextResponse(r.headers["user-agent"])),
        Route("/host", lambda r: PlainTextResponse(r.headers["host"])),
    ]
    return Starlette(routes=routes)


@dataclass
class Site:
    """A running copy of the fixture site."""

    port: int
    log: SiteLog
    scheme: str = "http"

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def policy(self, **changes: Any) -> FetchPolicy:
        changes.setdefault("allow_private", True)
        return FetchPolicy(allowed_ports=frozenset({80, 443, self.port}), **changes)


@dataclass
class Names:
    """A resolver that answers from a table, so any name can point at loopback."""

    answers: dict[str, list[str]] = field(default_factory=dict)

    async def __call__(self, host: str) -> list[str]:
        if host.endswith(".test") and host not in self.answers:
            return ["127.0.0.1"]
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.answers[host]


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    log = SiteLog()
    with serve_port(build_site(log)) as port:
        yield Site(port, log)


@pytest.fixture(scope="module")
def tls_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, ssl.SSLContext]]:
    """The same site over HTTPS, with a certificate for secure.test only."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=secure.test",
         "-addext", "subjectAltName=DNS:secure.test",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    log = SiteLog()
    with serve_port(build_site(log), ssl_certfile=str(cert), ssl_keyfile=str(key)) as port:
        yield Site(port, log, scheme="https"), ssl.create_default_context(cafile=str(cert))


def test_extraction_is_reexported() -> None:
    assert extract_main_text is extraction.extract_main_text


async def test_article_page_yields_title_and_main_text(site: Site) -> None:
    page = await fetch_page(site.url("/article"), policy=site.policy())
    assert page.title == ARTICLE_TITLE
    assert "movable metal type in Mainz" in page.text
    assert "All rights reserved" not in page.text
    assert page.url == page.final_url == site.url("/article")
    assert page.language == "en"
    assert page.published_date == "2024-03-05"


async def test_plain_text_page_is_kept_as_is(site: Site) -> None:
    page = await fetch_page(site.url("/plain.txt"), policy=site.policy())
    assert page.text == (SITE / "plain.txt").read_text()
    assert page.title == "Field notes on early presses"


async def test_declared_charset_decodes_the_page(site: Site) -> None:
    page = await fetch_page(site.url("/latin1"), policy=site.policy())
    assert page.title == "Café"
    assert "Un café crème." in page.text


async def test_redirect_chain_of_five_is_followed_to_the_last_url(site: Site) -> None:
    page = await fetch_page(site.url("/redirect/5"), policy=site.policy())
    assert page.url == site.url("/redirect/5")
    assert page.final_url == site.url("/article")
    assert page.title == ARTICLE_TITLE


async def test_sixth_redirect_is_refused(site: Site) -> None:
    with pytest.raises(ScrapeError, match="redirected more than 5 times"):
        await fetch_page(site.url("/redirect/6"), policy=site.policy())


@pytest.mark.parametrize(
    "policy_changes",
    [{"allow_private": False, "allowed_networks": ("127.0.0.0/8",)}, {"allow_private": True}],
    ids=["loopback-allowed", "private-allowed"],
)
async def test_redirect_to_cloud_metadata_is_refused(
    site: Site, policy_changes: dict[str, Any]
) -> None:
    start = site.url("/elsewhere?to=http://169.254.169.254/latest/meta-data/")
    with pytest.raises(UnsafeURLError, match="cloud metadata"):
        await fetch_page(start, policy=site.policy(**policy_changes))


async def test_redirect_to_a_name_resolving_to_a_private_address_is_refused(site: Site) -> None:
    names = Names({"intranet.example": ["10.0.0.7"]})
    policy = site.policy(allow_private=False, allowed_networks=("127.0.0.0/8",))
    start = site.url("/elsewhere?to=http://intranet.example/")
    with pytest.raises(UnsafeURLError, match="private"):
        await fetch_page(start, policy=policy, resolver=names)


async def test_loopback_is_refused_unless_the_policy_allows_it(site: Site) -> None:
    with pytest.raises(UnsafeURLError, match="loopback"):
        await fetch_page(site.url("/article"), policy=site.policy(allow_private=False))


async def test_connection_goes_to_the_checked_address_with_the_name_as_host(site: Site) -> None:
    # site.test exists only in this resolver, so a second lookup by httpx would fail
    policy = site.policy(allow_private=False, allowed_networks=("127.0.0.0/8",))
    page = await fetch_page(site.url("/host", "site.test"), policy=policy, resolver=Names())
    assert page.text == f"site.test:{site.port}"


async def test_next_checked_address_is_tried_when_one_refuses_connections(site: Site) -> None:
    names = Names({"two.test": ["127.0.0.2", "127.0.0.1"]})  # nothing listens on 127.0.0.2
    page = await fetch_page(site.url("/host", "two.test"), policy=site.policy(), resolver=names)
    assert page.text == f"two.test:{site.port}"


async def test_stream_past_the_size_cap_is_cut_off_early(site: Site) -> None:
    with pytest.raises(ScrapeError, match="larger than"):
        await fetch_page(site.url("/endless"), policy=site.policy(max_bytes=256 * 1024))
    assert await asyncio.to_thread(site.log.stream_closed.wait, 10)
    assert site.log.chunks_sent < ENDLESS_CHUNKS // 16


async def test_declared_length_past_the_size_cap_is_refused(site: Site) -> None:
    with pytest.raises(ScrapeError, match="larger than 1000000 bytes"):
        await fetch_page(site.url("/large"), policy=site.policy(max_bytes=1_000_000))


async def test_gzip_that_inflates_past_the_size_cap_is_refused(site: Site) -> None:
    with pytest.raises(ScrapeError, match="larger than"):
        await fetch_page(site.url("/encoded/gzip-bomb"), policy=site.policy(max_bytes=200_000))


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_compressed_page_is_inflated(site: Site, coding: str) -> None:
    page = await fetch_page(site.url(f"/encoded/{coding}"), policy=site.policy())
    assert page.title == ARTICLE_TITLE


async def test_unrequested_content_encoding_is_refused(site: Site) -> None:
    with pytest.raises(ScrapeError, match="unsupported content encoding 'zstd'"):
        await fetch_page(site.url("/encoded/zstd"), policy=site.policy())


@pytest.mark.parametrize("path", ["/doc.pdf", "/image.png"])
async def test_non_document_content_type_is_refused(site: Site, path: str) -> None:
    with pytest.raises(ScrapeError, match="content type"):
        await fetch_page(site.url(path), policy=site.policy())


async def test_error_status_is_a_scrape_error(site: Site) -> None:
    with pytest.raises(ScrapeError, match="HTTP 404"):
        await fetch_page(site.url("/missing"), policy=site.policy())


async def test_hanging_endpoint_hits_the_total_time_cap(site: Site) -> None:
    with pytest.raises(ScrapeError, match="gave up .* after 0.5 s"):
        await fetch_page(site.url("/hang"), policy=site.policy(timeout_s=0.5))


async def test_robots_txt_forbidding_a_path_stops_the_fetch(site: Site) -> None:
    with pytest.raises(ScrapeError, match="robots.txt .* forbids"):
        await fetch_page(site.url("/private/secret"), policy=site.policy())
    page = await fetch_page(site.url("/private/secret"), policy=site.policy(respect_robots=False))
    assert page.title == ARTICLE_TITLE


async def test_robots_txt_is_fetched_once_per_host(site: Site) -> None:
    async with Scraper(site.policy(), resolver=Names()) as scraper:
        paths = ["/article", "/plain.txt", "/redirect/2", "/user-agent"]
        await asyncio.gather(*(scraper.fetch(site.url(p, "once.test")) for p in paths))
        await scraper.fetch(site.url("/host", "once.test"))
        await scraper.fetch(site.url("/host", "twice.test"))
        with pytest.raises(ScrapeError, match="robots.txt"):
            await scraper.fetch(site.url("/private/secret", "once.test"))
    assert site.log.robots["once.test"] == 1
    assert site.log.robots["twice.test"] == 1


@pytest.mark.parametrize("host", ["robots-missing.test", "robots-broken.test", "robots-slow.test"])
async def test_unavailable_robots_txt_allows_the_page(site: Site, host: str) -> None:
    page = await fetch_page(
        site.url("/private/secret", host), policy=site.policy(timeout_s=2), resolver=Names()
    )
    assert page.title == ARTICLE_TITLE
    assert site.log.robots[host] == 1


async def test_concurrent_requests_to_one_host_stay_within_the_limit(site: Site) -> None:
    async with Scraper(site.policy(per_host_concurrency=2)) as scraper:
        await asyncio.gather(*(scraper.fetch(site.url("/slow/one-host")) for _ in range(6)))
    assert site.log.most_in_flight["one-host"] == 2


async def test_concurrency_limit_applies_per_host(site: Site) -> None:
    async with Scraper(site.policy(per_host_concurrency=1), resolver=Names()) as scraper:
        urls = [site.url("/slow/two-hosts", host) for host in ["a.test", "b.test"] * 3]
        await asyncio.gather(*(scraper.fetch(url) for url in urls))
    assert site.log.most_in_flight["two-hosts"] == 2


async def test_user_agent_is_sent(site: Site) -> None:
    page = await fetch_page(site.url("/user-agent"), policy=site.policy())
    assert page.text == USER_AGENT
    custom = site.policy(user_agent="research-agent/9.9 (tests)")
    assert (await fetch_page(site.url("/user-agent"), policy=custom)).text == custom.user_agent


async def test_tls_is_verified_against_the_name_while_connecting_to_the_checked_address(
    tls_site: tuple[Site, ssl.SSLContext],
) -> None:
    site, trust = tls_site
    async with (
        httpx.AsyncClient(verify=trust) as client,
        Scraper(site.policy(), client=client, resolver=Names()) as scraper,
    ):
        page = await scraper.fetch(site.url("/host", "secure.test"))
        assert page.text == f"secure.test:{site.port}"
        # same address, a name the certificate does not cover: no reuse of the verified connection
        with pytest.raises(ScrapeError, match="ConnectError"):
            await scraper.fetch(site.url("/host", "other.test"))


async def test_a_redirect_to_another_host_obeys_that_host_s_robots_txt(site: Site) -> None:
    target = site.url("/private/secret", "other-host.test")
    async with Scraper(site.policy(), resolver=Names()) as scraper:
        with pytest.raises(ScrapeError, match="robots.txt"):
            await scraper.fetch(site.url(f"/elsewhere?to={target}", "first-host.test"))
        allowed = await scraper.fetch(
            site.url(f"/elsewhere?to={site.url('/article', 'other-host.test')}", "first-host.test")
        )
    assert allowed.title == ARTICLE_TITLE
    assert site.log.robots["first-host.test"] == 1
    assert site.log.robots["other-host.test"] == 1
