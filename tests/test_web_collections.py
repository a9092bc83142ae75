"""The web page's collections panel in Chromium: make a collection, upload files, research over it.

The server asks for a key, so every call the panel makes (the multipart upload too) must
send the one the page stores.
"""

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import FilePayload, Locator, Page, expect

from .test_collections import docx_bytes
from .test_web import (  # noqa: F401
    KEY,
    SHOTS,
    WAIT_MS,
    dialogs,
    page,
    start_server,
    wait_for_status,
    web_corpus,
)

TOPIC = "lighthouse lamp and fog signals"
NOTES = (
    "Lighthouse keepers wound the clockwork of the lighthouse lamp every evening. "
    "In fog the keepers sounded the lighthouse fog signal until the fog lifted."
)


FILES: list[FilePayload] = [
    {
        "name": "handbook.docx",
        "mimeType": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "buffer": docx_bytes("fog signal"),
    },
    {"name": "notes.txt", "mimeType": "text/plain", "buffer": NOTES.encode()},
]
BROKEN: FilePayload = {
    "name": "broken.pdf",
    "mimeType": "application/pdf",
    "buffer": b"%PDF-1.7\nthis is no PDF at all, only garbage \x00\x01\x02\xff",
}


@pytest.fixture
def server(tmp_path: Path, web_corpus: Path, settings_env: Path) -> Iterator[str]:  # noqa: F811
    yield from start_server(tmp_path, web_corpus, engine="extractive", api_keys=[KEY])


async def open_with_key(page: Page, base: str) -> None:  # noqa: F811
    await page.goto(base)
    await page.fill("#api-key", KEY)
    await page.click("#save-key")
    await expect(page.locator("#key-panel")).to_be_hidden(timeout=WAIT_MS)


def collection_item(page: Page, name: str) -> Locator:  # noqa: F811
    return page.locator(f'#collections .collection[data-name="{name}"]')


async def upload(item: Locator, files: list[FilePayload]) -> None:
    await item.locator("input.collection-files").set_input_files(files)
    await item.locator("button", has_text="Upload").click()


async def test_a_collection_is_created_filled_and_emptied_from_the_page(
    page: Page,  # noqa: F811
    server: str,
    dialogs: list[str],  # noqa: F811
) -> None:
    await open_with_key(page, server)
    await expect(page.locator("#collections-empty")).to_be_visible(timeout=WAIT_MS)
    await page.fill("#collection-name", "lighthouse")
    await page.click("#create-collection")
    item = collection_item(page, "lighthouse")
    await expect(item).to_be_visible(timeout=WAIT_MS)
    await expect(item).to_contain_text("No documents yet.")

    await upload(item, FILES)
    documents = item.locator(".document")
    await expect(documents).to_have_count(2, timeout=WAIT_MS)
    await expect(documents.nth(0)).to_contain_text("handbook.docx")
    await expect(documents.nth(0)).to_contain_text(re.compile(r"Word · \d+ sections? · [\d.]+ KB"))
    await expect(documents.nth(1)).to_contain_text("notes.txt")
    await expect(documents.nth(1)).to_contain_text(f"text · 1 section · {len(NOTES)} bytes")
    await expect(item.locator(".error")).to_be_hidden()

    # An unreadable file: the API's message, naming it, and the list as it was.
    await upload(item, [BROKEN])
    error = item.locator(".error")
    await expect(error).to_be_visible(timeout=WAIT_MS)
    await expect(error).to_contain_text("broken.pdf")
    await expect(documents).to_have_count(2)
    async with httpx.AsyncClient(base_url=server, headers={"X-API-Key": KEY}) as http:
        listed = (await http.get("/v1/collections/lighthouse/documents")).json()["items"]
        answer = await http.post(
            "/v1/collections/lighthouse/documents",
            files=[("file", (BROKEN["name"], BROKEN["buffer"], BROKEN["mimeType"]))],
        )
    assert answer.status_code == 422, answer.text
    assert await error.text_content() == answer.json()["error"]["message"]
    assert sorted(d["name"] for d in listed) == ["handbook.docx", "notes.txt"]
    await page.screenshot(path=str(SHOTS / "collections.png"), full_page=True)

    # The start form offers it as a source.
    await expect(page.locator("#source-collections label", has_text="lighthouse")).to_be_visible()

    await item.get_by_role("button", name="Delete notes.txt").click()
    await expect(documents).to_have_count(1, timeout=WAIT_MS)
    await expect(documents.first).to_contain_text("handbook.docx")
    await item.get_by_role("button", name="Delete collection").click()
    await expect(item).to_have_count(0, timeout=WAIT_MS)
    await expect(page.locator("#collections-empty")).to_be_visible()
    await expect(page.locator("#source-collections .collection-choice")).to_have_count(0)
    assert sum(d.startswith("confirm") for d in dialogs) == 2
    async with httpx.AsyncClient(base_url=server, headers={"X-API-Key": KEY}) as http:
        assert (await http.get("/v1/collections")).json()["items"] == []


async def test_a_research_over_only_a_collection_cites_its_files(
    page: Page,  # noqa: F811
    server: str,
) -> None:
    async with httpx.AsyncClient(base_url=server, headers={"X-API-Key": KEY}) as http:
        made = await http.post("/v1/collections", json={"name": "lighthouse"})
        assert made.status_code == 201, made.text
        collection = made.json()["id"]
        other = await http.post("/v1/collections", json={"name": "unused"})
        assert other.status_code == 201, other.text
    await open_with_key(page, server)
    await upload(collection_item(page, "lighthouse"), FILES[:1])  # the handbook alone
    await expect(collection_item(page, "lighthouse").locator(".document")).to_have_count(
        1, timeout=WAIT_MS
    )
    only = page.locator("#collections-only")
    await expect(only).to_be_disabled()  # no collection ticked yet
    await page.locator("#source-collections label", has_text="lighthouse").locator("input").check()
    await only.check()
    await page.fill("#topic", TOPIC)
    await page.fill("#min-sources", "1")
    await page.click("#start")
    await page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"), timeout=WAIT_MS)
    thread_id = page.url.rsplit("/", 1)[-1]
    await wait_for_status(page, "completed")
    async with httpx.AsyncClient(base_url=server, headers={"X-API-Key": KEY}) as http:
        options = (await http.get(f"/v1/research/{thread_id}")).json()["options"]
    assert options["collections"] == [collection] and options["collections_only"] is True

    # The references name the file; none is a link the browser cannot follow.
    report = page.locator("#report")
    cited = report.locator(".footnotes button.collection-source")
    await expect(cited.first).to_be_visible(timeout=WAIT_MS)
    await expect(cited.first).to_have_text(re.compile(r"^Keeper's handbook \(handbook\.docx, "))
    assert await report.locator("a[href^='collection:']").count() == 0
    assert await report.locator(".footnotes a[href^='http']").count() == 0  # only the collection
    # A reference opens the passage the run read, as a footnote mark does.
    title = await cited.first.text_content()
    await cited.first.click()
    dialog = page.locator("#source-dialog")
    await expect(dialog).to_be_visible(timeout=WAIT_MS)
    await expect(page.locator("#source-title")).to_have_text(title or "", timeout=WAIT_MS)
    body = page.locator("#source-body")
    await expect(body).to_contain_text("passage of your collection")
    await expect(body.locator("dd", has_text=re.compile(r"^handbook\.docx$"))).to_have_count(1)
    await expect(body).to_contain_text("lighthouse")
    await page.screenshot(path=str(SHOTS / "collection-report.png"), full_page=True)
