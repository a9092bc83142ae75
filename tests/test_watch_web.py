"""The web page shows a watched thread's refreshes as a list of dated diffs (Chromium)."""

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from .test_web import SHOTS, WAIT_MS, page, start_run, start_server, wait_for_status, web_corpus  # noqa: F401


@pytest.fixture
def server(tmp_path: Path, web_corpus: Path, settings_env: Path) -> Iterator[str]:  # noqa: F811
    yield from start_server(tmp_path, web_corpus, watch_min_seconds=0.5, watch_poll_seconds=0.1)


async def test_a_watched_thread_lists_each_refresh_with_its_date_and_diff(
    page: Page,  # noqa: F811
    server: str,
) -> None:
    thread = await start_run(page, server)
    await wait_for_status(page, "completed")
    await expect(page.locator("#watch-panel")).to_be_hidden()  # not watched
    async with httpx.AsyncClient(base_url=server, timeout=30) as http:
        made = await http.post(f"/v1/research/{thread}/watch", json={"every": "PT1S"})
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + WAIT_MS / 1000
        while len((await http.get(f"/v1/research/{thread}/watch/changes")).json()) < 2:
            assert time.monotonic() < deadline, "gave up waiting for two refreshes"
            await asyncio.sleep(0.1)
        await http.post(f"/v1/research/{thread}/watch", json={"every": "P1D"})  # no more
        # A refresh already started when the interval changed still finishes: wait for it.
        while (await http.get(f"/v1/research/{thread}/watch")).json()["in_flight"] is not None:
            assert time.monotonic() < deadline, "gave up waiting for the last refresh"
            await asyncio.sleep(0.1)
        entries = (await http.get(f"/v1/research/{thread}/watch/changes")).json()
    await page.reload()
    panel = page.locator("#watch-panel")
    await expect(panel).to_be_visible(timeout=WAIT_MS)
    await expect(page.locator("#watch-summary")).to_contain_text("Refreshed every P1D")
    items = page.locator("#watch-changes > li")
    await expect(items).to_have_count(len(entries))
    newest = items.first
    await expect(newest.locator("time")).to_have_count(1)
    await expect(newest.locator("a")).to_have_attribute("href", f"#/runs/{entries[0]['thread_id']}")
    await expect(newest).to_contain_text("sources +0 −0 ~0")
    await page.screenshot(path=str(SHOTS / "watch.png"), full_page=True)
