"""The web page in a real browser (Debian's Chromium driven by Playwright) against a live server.

The server runs the extractive engine on a fixture corpus that also holds a document whose
title is an XSS probe; the page must show it as text and never run it.
"""

import io
import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import docx
import httpx
import pypdf
import pytest
from playwright.async_api import Dialog, Page, Route, async_playwright, expect

from app.api import create_app
from app.settings import Settings
from tools.corpus_files import iter_documents
from tools.local_corpus import build_index

from .fake_llm import FakeLLM
from .llm_script import ResearchModel
from .servers import serve_port
from .support import FIXTURE_CORPUS, TOPIC
from .test_questions import ANSWERABLE, UNANSWERABLE

XSS_TITLE = "<img src=x onerror=alert(1)>"
XSS_DOCUMENT = {
    "title": XSS_TITLE,
    "url": "https://example.org/xss-probe",
    "text": "The history of the printing press begins with Johannes Gutenberg in Mainz. "
    "The printing press spread across Europe within decades. Printing press workshops "
    "produced books, pamphlets and newspapers, and the printing press changed literacy.",
}
WAIT_MS = 30_000  # a safety net against a hung page, never an assertion on speed
KEY = "web-test-key-123"
# Debian's Chromium (`.ci/run` installs it); Playwright downloads no browser here.
CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",  # no traffic the closed network would refuse
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def web_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("web-corpus")
    for path in FIXTURE_CORPUS.iterdir():
        shutil.copy(path, folder / path.name)
    (folder / "probe.jsonl").write_text(json.dumps(XSS_DOCUMENT) + "\n")
    index = folder / "index.sqlite"
    build_index(iter_documents(folder), index)
    return index


def start_server(tmp_path: Path, index: Path, **overrides: Any) -> Iterator[str]:
    settings = Settings(
        data_dir=tmp_path / "data", corpus_index=index, search_provider="local", **overrides
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def server(tmp_path: Path, web_corpus: Path, settings_env: Path) -> Iterator[str]:
    yield from start_server(tmp_path, web_corpus)


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    """A fresh page of Debian's Chromium (Playwright's async API: the suite is asyncio)."""
    if CHROMIUM is None:
        pytest.skip("no chromium binary: `apt-get install chromium` to run the browser tests")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield await browser.new_page(viewport={"width": 1280, "height": 800})
        finally:
            await browser.close()


@pytest.fixture
def dialogs(page: Page) -> list[str]:
    """Every alert/confirm the page opens (accepted, so a confirm() goes on)."""
    seen: list[str] = []

    async def record(dialog: Dialog) -> None:
        seen.append(f"{dialog.type}: {dialog.message}")
        await dialog.accept()

    page.on("dialog", record)
    return seen


# Screenshots of the page's states, kept for a look after the run (not compared to anything).
SHOTS = Path(os.environ.get("RESEARCH_WEB_SHOTS", "/tmp/research-agent-shots"))
SHOTS.mkdir(parents=True, exist_ok=True)


async def start_run(
    page: Page, base: str, approval: str = "none", min_sources: int = 3, topic: str = TOPIC
) -> str:
    await page.goto(base)
    await page.fill("#topic", topic)
    await page.fill("#min-sources", str(min_sources))
    await page.select_option("#approval", approval)
    await page.click("#start")
    await page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"), timeout=WAIT_MS)
    return page.url.rsplit("/", 1)[-1]


async def wait_for_status(page: Page, status: str) -> None:
    """Wait until the badge stands for `status` (the API's word; the badge says it plainly)."""
    await expect(page.locator("#run-status")).to_have_attribute(
        "data-status", status, timeout=WAIT_MS
    )


async def test_a_run_whose_sources_were_insufficient_says_so_in_its_badges(
    page: Page, server: str
) -> None:
    thread_id = await start_run(page, server, topic="zyxwv frobnication", min_sources=1)
    await wait_for_status(page, "insufficient")
    await expect(page.locator("#run-status")).to_have_text("too little found")
    item = page.locator(f'#threads .thread[data-thread-id="{thread_id}"] .status')
    await expect(item).to_have_text("too little found", timeout=WAIT_MS)
    await page.reload()  # from the list and the detail, not only from the live events
    await wait_for_status(page, "insufficient")
    await expect(item).to_have_text("too little found", timeout=WAIT_MS)
    # The report says so in its first line, and has no empty References heading.
    report = page.locator("#report")
    await expect(report.locator(".report-summary .report-status")).to_have_text(
        "insufficient", timeout=WAIT_MS
    )
    assert await report.locator("h2", has_text="References").count() == 0
    await page.screenshot(path=str(SHOTS / "insufficient.png"), full_page=True)


async def test_a_run_whose_budget_ends_before_a_draft_passes_says_partial(
    page: Page, tmp_path: Path, web_corpus: Path, settings_env: Path, llm: FakeLLM
) -> None:
    llm.responder = ResearchModel(review_scores=0.5)  # never satisfied: the budget ends it
    for base in start_server(
        tmp_path, web_corpus, engine="llm", llm_base_url=llm.base_url, llm_api_key="k"
    ):
        thread_id = await start_run(page, base, min_sources=1)
        await wait_for_status(page, "partial")
        item = page.locator(f'#threads .thread[data-thread-id="{thread_id}"] .status')
        await expect(item).to_have_text("partial report", timeout=WAIT_MS)
        report = page.locator("#report")
        await expect(report.locator(".report-summary .report-status")).to_have_text(
            "partial", timeout=WAIT_MS
        )
        await expect(report.locator("blockquote")).to_contain_text("budget")
        await page.screenshot(path=str(SHOTS / "partial.png"), full_page=True)


async def test_an_empty_topic_asks_for_one_in_plain_words(page: Page, server: str) -> None:
    await page.goto(server)
    await page.fill("#topic", "   ")
    await page.click("#start")
    await expect(page.locator("#form-error")).to_have_text(
        "Enter a topic: what should be researched?"
    )
    assert await page.locator("#topic").get_attribute("aria-invalid") == "true"
    assert "#/runs/" not in page.url


async def test_plan_approval_with_an_edited_query_to_a_report_whose_footnotes_link_to_references(
    page: Page, server: str, dialogs: list[str], tmp_path: Path
) -> None:
    await start_run(page, server, approval="plan")
    await wait_for_status(page, "waiting_for_approval")
    await expect(page.locator("#run-status")).to_have_text("waiting for your approval")
    panel = page.locator("#approval-panel")
    await expect(panel).to_be_visible()
    queries = panel.locator("input.plan-query")
    assert await queries.count() >= 1
    await queries.first.fill("Gutenberg Bible Mainz")
    await page.click("#edit-approve")

    await wait_for_status(page, "completed")
    await expect(page.locator("#run-status")).to_have_text("finished")
    await expect(panel).to_be_hidden()
    # A finished run shows its report first; how it ran is folded below it.
    report = page.locator("#report")
    await expect(report.locator("h1")).to_be_visible(timeout=WAIT_MS)
    progress = page.locator("#progress-panel")
    await expect(progress).not_to_have_attribute("open", "")
    timeline = page.locator("#timeline")
    await expect(timeline).to_be_hidden()
    report_top = (await report.bounding_box() or {"y": 0.0})["y"]
    progress_top = (await progress.bounding_box() or {"y": 0.0})["y"]
    assert report_top < progress_top
    await progress.locator("summary").first.click()
    # The edited plan is a step of its own, with the query as edited.
    edited = timeline.locator("li.step[data-kind=plan][data-edited=true]")
    await expect(edited).to_have_count(1)
    await expect(edited).to_contain_text("Gutenberg Bible Mainz")
    for kind in ("plan", "searches", "draft", "review", "report"):
        await expect(timeline.locator(f"li.step[data-kind={kind}]").first).to_be_visible()
    # The searches are folded into one step that counts them, and open on a click.
    searches = timeline.locator("li.step[data-kind=searches]").first
    await expect(searches.locator("summary")).to_contain_text("searches")
    await expect(timeline.locator("li.step[data-kind=search]").first).to_be_hidden()
    await searches.locator("summary").click()
    await expect(timeline.locator("li.step[data-kind=search]").first).to_contain_text(
        "Gutenberg Bible Mainz"
    )
    # The sources the report cites are listed first; the others are folded under them.
    cited = {
        await a.get_attribute("href") for a in await page.locator("#sources li.source a").all()
    }
    assert len(cited) >= 3
    references = {
        await a.get_attribute("href") for a in await report.locator("a[href^=http]").all()
    }
    assert cited <= {unquote(str(r)) for r in references} | references

    # One line says how the report stands; the front matter's details stay folded.
    await expect(report.locator(".report-summary")).to_contain_text("sources")
    await expect(report.locator(".report-summary .report-status")).to_have_text("final")
    await expect(report.locator(".report-meta")).to_be_hidden()
    # Every citation of a source shows the same [n] (no [1:1], [1:2]).
    captions = await report.locator("sup.footnote-ref a").all_inner_texts()
    assert captions and all(re.fullmatch(r"\[\d+\]", c) for c in captions), captions
    # The research graph, with every node and the last one run marked.
    graph = page.locator("#graph svg")
    await expect(graph).to_be_visible()
    nodes = await graph.locator(".graph-node").evaluate_all("ns => ns.map(n => n.dataset.node)")
    assert {"supervisor", "researcher", "writer", "reviewer", "finalize"} <= set(nodes)
    assert await graph.locator(".graph-node.visited").count() >= 4
    footnote = report.locator("sup.footnote-ref a").first
    target = await footnote.get_attribute("href")
    assert target is not None and target.startswith("#fn")
    await footnote.click()
    reference = report.locator(f"li{target}")
    await expect(reference).to_be_in_viewport()
    await expect(reference.locator("a[href^=http]").first).to_be_visible()
    await wait_for_status(page, "completed")  # following a footnote keeps the run open

    # A screenshot of the finished report, not blank: much more detail than an empty page.
    shot = tmp_path / "report.png"
    await page.screenshot(path=str(shot), full_page=True)
    shutil.copy(shot, SHOTS / "report.png")
    blank = tmp_path / "blank.png"
    await page.set_content("<html><body></body></html>")
    await page.screenshot(path=str(blank), full_page=True)
    assert shot.stat().st_size > 4 * blank.stat().st_size
    assert dialogs == []


async def test_a_source_titled_with_markup_shows_as_text_and_runs_nothing(
    page: Page, server: str, dialogs: list[str]
) -> None:
    await start_run(page, server)
    await wait_for_status(page, "completed")
    probe = page.locator("ul.sources li.source", has_text=XSS_TITLE)  # cited or not
    await expect(probe).to_have_count(1)
    await expect(probe.locator("a")).to_have_text(XSS_TITLE)
    assert await page.locator("#sources img, #report img, #timeline img").count() == 0
    await expect(page.locator("#report h1")).to_be_visible(timeout=WAIT_MS)
    assert dialogs == []


async def test_a_reload_mid_run_rebuilds_the_timeline_without_duplicates(
    page: Page, tmp_path: Path, web_corpus: Path, settings_env: Path
) -> None:
    # Slow searches keep the run going while the page is reloaded.
    for base in start_server(tmp_path, web_corpus, search_delay_ms=400):
        thread_id = await start_run(page, base, min_sources=50)
        await expect(page.locator("#timeline li.step[data-kind=plan]")).to_have_count(
            1, timeout=WAIT_MS
        )
        await page.reload()
        await wait_for_status(page, "completed")
        await expect(page.locator("#report h1")).to_be_visible(timeout=WAIT_MS)

        notes = httpx.get(f"{base}/v1/research/{thread_id}/notes").json()
        detail = httpx.get(f"{base}/v1/research/{thread_id}").json()
    steps = page.locator("#timeline li.step")
    assert await page.locator("#timeline li.step[data-kind=plan]").count() == 1
    assert await page.locator("#timeline li.step[data-kind=search]").count() == len(notes)
    assert await page.locator("#timeline li.step[data-kind=report]").count() == 1
    # textContent: the folded search steps have no rendered text, but they must not repeat.
    texts = await steps.evaluate_all("ns => ns.map(n => n.textContent)")
    assert len(texts) == len(set(texts)), "a step shown twice"
    hrefs = [
        await a.get_attribute("href") for a in await page.locator("ul.sources li.source a").all()
    ]
    assert len(hrefs) == len(set(hrefs)), "a source shown twice"
    assert detail["status"] == "completed"


async def test_at_phone_width_nothing_scrolls_sideways(
    page: Page, server: str, dialogs: list[str]
) -> None:
    await page.set_viewport_size({"width": 390, "height": 844})
    await start_run(page, server)
    await wait_for_status(page, "completed")
    await expect(page.locator("#report h1")).to_be_visible(timeout=WAIT_MS)
    overflow = await page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"{overflow} px of horizontal scroll at 390 px"
    await page.screenshot(path=str(SHOTS / "phone.png"), full_page=True)


async def test_the_past_research_list_and_its_buttons(
    page: Page, server: str, dialogs: list[str]
) -> None:
    thread_id = await start_run(page, server, approval="plan")
    await wait_for_status(page, "waiting_for_approval")
    item = page.locator(f"#threads li.thread[data-thread-id='{thread_id}']")
    await expect(item).to_be_visible()
    await page.click("#cancel")
    await wait_for_status(page, "cancelled")
    await expect(item.locator(".status")).to_have_text("cancelled", timeout=WAIT_MS)
    await page.click("#delete")
    await expect(item).to_have_count(0, timeout=WAIT_MS)
    assert httpx.get(f"{server}/v1/research/{thread_id}").status_code == 404
    assert any(d.startswith("confirm") for d in dialogs)


async def test_a_server_with_keys_asks_for_one_and_remembers_it(
    page: Page, tmp_path: Path, web_corpus: Path, settings_env: Path
) -> None:
    for base in start_server(tmp_path, web_corpus, api_keys=[KEY]):
        await page.goto(base)
        await expect(page.locator("#key-panel")).to_be_visible(timeout=WAIT_MS)
        await page.fill("#api-key", KEY)
        await page.click("#save-key")
        await expect(page.locator("#key-panel")).to_be_hidden(timeout=WAIT_MS)
        await start_run(page, base)
        await wait_for_status(page, "completed")
        await page.reload()
        await wait_for_status(page, "completed")
        await expect(page.locator("#key-panel")).to_be_hidden()


async def test_the_page_forbids_inline_script(server: str) -> None:
    response = httpx.get(server)
    assert response.status_code == 200 and "text/html" in response.headers["content-type"]
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert httpx.get(f"{server}/static/app.js").status_code == 200


async def test_the_report_gate_shows_the_report_and_signs_it_off(
    page: Page, server: str, dialogs: list[str]
) -> None:
    await start_run(page, server, approval="plan_and_report")
    await wait_for_status(page, "waiting_for_approval")
    await page.click("#approve")  # the plan
    # The draft under review reads as the report will: rendered, front matter folded.
    preview = page.locator("#approval-report-preview")
    await expect(preview.locator("h2", has_text="Executive Summary")).to_be_visible(timeout=WAIT_MS)
    await expect(preview.locator(".report-meta")).to_be_hidden()
    await expect(page.locator("#report-empty")).to_contain_text("once you approve")
    await page.screenshot(path=str(SHOTS / "report-approval.png"), full_page=True)
    await wait_for_status(page, "waiting_for_approval")
    await page.click("#approve")  # the report
    await wait_for_status(page, "completed")
    await expect(page.locator("#report h1")).to_be_visible(timeout=WAIT_MS)
    await expect(page.locator("#approval-panel")).to_be_hidden()
    assert dialogs == []


async def test_a_footnote_mark_opens_the_text_the_run_read_with_its_quote_marked(
    page: Page, server: str, dialogs: list[str]
) -> None:
    thread_id = await start_run(page, server)
    await wait_for_status(page, "completed")
    mark = page.locator('#report sup.footnote-ref a[href="#fn1"]').first
    await expect(mark).to_be_visible(timeout=WAIT_MS)
    await mark.click()
    panel = page.locator("#source-dialog")
    await expect(panel).to_be_visible()
    text = panel.locator(".source-text")
    await expect(text).to_be_visible(timeout=WAIT_MS)
    source = httpx.get(f"{server}/v1/research/{thread_id}/sources/1").json()
    assert source["kind"] == "passage" and source["quotes"]
    assert await text.text_content() == source["text"]
    marked = await text.locator("mark").all_text_contents()
    assert marked and all(m and m in source["text"] for m in marked), marked
    await expect(panel.locator("#source-title")).to_have_text(source["title"])
    facts = panel.locator(".source-facts")
    await expect(facts).to_contain_text("passage")
    await expect(facts).to_contain_text(source["content_hash"][:12])
    citing = panel.locator(".source-citing li")
    assert await citing.count() == len({q["sentence"] for q in source["quotes"]})
    await page.screenshot(path=str(SHOTS / "source-panel.png"), full_page=False)
    await page.keyboard.press("Escape")
    await expect(panel).to_be_hidden()
    await expect(mark).to_be_focused()
    # A footnote the server does not know (404) says so in the panel, as text.
    missing = {"error": {"code": "not_found", "message": "the report has no footnote 1"}}
    await page.route("**/sources/*", lambda route: route.fulfill(status=404, json=missing))
    await mark.click()
    await expect(panel.locator("#source-error")).to_contain_text("no footnote 1")
    await expect(text).to_have_count(0)
    await panel.locator("#source-close").click()
    await expect(panel).to_be_hidden()
    await expect(mark).to_be_focused()
    assert dialogs == []


async def test_a_replayed_rerun_opens_finishes_and_compares_equal_to_its_original(
    page: Page, server: str, dialogs: list[str]
) -> None:
    original = await start_run(page, server)
    await wait_for_status(page, "completed")
    await expect(page.locator("#compare")).to_be_hidden()  # not a re-run itself
    await page.click("#rerun-replay")
    note = page.locator("#rerun-of")
    await expect(note).to_contain_text("(replay)", timeout=WAIT_MS)
    assert page.url.rsplit("/", 1)[-1] != original
    await expect(note.locator("a")).to_have_attribute("href", f"#/runs/{original}")
    await wait_for_status(page, "completed")
    await expect(page.locator("#report h1")).to_be_visible(timeout=WAIT_MS)
    await page.click("#compare")
    panel = page.locator("#compare-panel")
    await expect(panel).to_be_visible(timeout=WAIT_MS)
    changed = panel.locator("[data-list=sources_changed]")
    await expect(changed).to_have_attribute("data-count", "0")
    await expect(changed).to_contain_text("none")
    rows = panel.locator(".compare-figures tbody tr")
    await expect(rows).to_have_count(7)
    for row in await rows.all():
        base = await row.locator("td.base").text_content()
        assert base == await row.locator("td.other").text_content(), await row.text_content()
    sources = panel.locator(".compare-figures tbody tr", has_text="Sources").locator("td.base")
    assert int(await sources.text_content() or "0") >= 3
    await page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)
    assert dialogs == []


MEMBER_LANES = "#timeline li.step[data-kind=members] .member-lane"


async def lanes_of(page: Page) -> list[dict[str, Any]]:
    """Each member lane as shown: name, status, type, queries, outcome and error, in order."""
    shown: list[dict[str, Any]] = await page.locator(MEMBER_LANES).evaluate_all(
        """lanes => lanes.map(l => ({
            member: l.dataset.member, status: l.dataset.status,
            type: l.querySelector('.member-type').textContent,
            queries: [...l.querySelectorAll('.member-queries li')].map(q => q.dataset.query),
            outcome: l.querySelector('.member-outcome').textContent,
            error: l.querySelector('.member-error').hidden
                ? null : l.querySelector('.member-error').textContent,
        }))"""
    )
    return shown


async def test_members_work_side_by_side_live_and_a_finished_run_shows_their_record(
    page: Page, tmp_path: Path, web_corpus: Path, settings_env: Path
) -> None:
    # Slow searches keep the members at work while the page looks.
    for base in start_server(tmp_path, web_corpus, search_delay_ms=400):
        thread_id = await start_run(page, base, min_sources=50)
        # Live: several lanes of the first round running at once, side by side.
        await page.wait_for_function(
            "lanes => document.querySelectorAll(lanes).length >= 2",
            arg=f"{MEMBER_LANES}[data-status=running]",
            timeout=WAIT_MS,
        )
        first, second = page.locator(MEMBER_LANES).nth(0), page.locator(MEMBER_LANES).nth(1)
        one, two = await first.bounding_box(), await second.bounding_box()
        assert one and two and two["x"] > one["x"] and abs(two["y"] - one["y"]) < 1, (one, two)
        await expect(first.locator(".member-status")).to_have_text("running")
        await page.locator("#timeline li.step[data-kind=members]").scroll_into_view_if_needed()
        await page.screenshot(path=str(SHOTS / "members-live.png"))
        await wait_for_status(page, "completed")
        rounds = httpx.get(f"{base}/v1/research/{thread_id}/rounds").json()
        plan = httpx.get(f"{base}/v1/research/{thread_id}").json()["plan"]

        # Finished: each lane as its round's record says, with what its member searched.
        recorded = [s for r in rounds if r["members"] for s in r["members"]["submissions"]]
        await expect(page.locator(f"{MEMBER_LANES}[data-status=SUCCESS]")).to_have_count(
            len(recorded), timeout=WAIT_MS
        )
        lanes = await lanes_of(page)
        assert [(x["member"], x["status"], x["type"]) for x in lanes] == [
            (s["agent_name"], s["status"], s["agent_type"]) for s in recorded
        ]
        # Every query of the plan, each in one lane (as text: one is the markup probe's title).
        assert sorted(q for x in lanes for q in x["queries"]) == sorted(plan["search_queries"])
        assert all(
            re.search(r"\d+ results? · [\d.]+ m?s · no model tokens$", x["outcome"]) for x in lanes
        ), lanes
        summary = page.locator("#timeline li.step[data-kind=members] .members-summary")
        await expect(summary).to_have_text(f"{len(recorded)} members ({len(recorded)} succeeded)")
        await page.locator("#progress-panel").evaluate("panel => { panel.open = true; }")
        await page.locator("#timeline li.step[data-kind=members]").scroll_into_view_if_needed()
        await page.screenshot(path=str(SHOTS / "members-finished.png"))

        # Reopened, from the replay: the same lanes once each.
        await page.reload()
        await wait_for_status(page, "completed")
        await expect(page.locator(MEMBER_LANES)).to_have_count(len(recorded), timeout=WAIT_MS)
        await expect(page.locator("#timeline li.step[data-kind=members]")).to_have_count(1)
        # The replayed events draw the lanes; the rounds' record, read once the run is shown
        # done, then gives each its type.
        await expect(page.locator(f"{MEMBER_LANES} .member-type:not([hidden])")).to_have_count(
            len(recorded), timeout=WAIT_MS
        )
        assert await lanes_of(page) == lanes

        # An event log that no longer holds the member events (a capped stream): the lanes
        # come from the thread's rounds alone.
        async def without_member_events(route: Route) -> None:
            answer = await route.fetch()
            frames = (await answer.text()).split("\r\n\r\n")
            kept = [f for f in frames if "event: member_" not in f]
            await route.fulfill(response=answer, body="\r\n\r\n".join(kept))

        await page.route("**/events", without_member_events)
        await page.reload()
        await wait_for_status(page, "completed")
        await expect(page.locator(f"{MEMBER_LANES}[data-status=SUCCESS]")).to_have_count(
            len(recorded), timeout=WAIT_MS
        )
        bare = await lanes_of(page)
        assert [(x["member"], x["type"], x["queries"]) for x in bare] == [
            (s["agent_name"], s["agent_type"], []) for s in recorded
        ]


async def test_a_member_that_failed_shows_its_error_in_its_lane(
    page: Page, tmp_path: Path, web_corpus: Path, settings_env: Path
) -> None:
    # One member at a time, searches slow against the run's time budget: a member whose turn
    # comes after it is an ERROR (the run still reports).
    for base in start_server(tmp_path, web_corpus, search_delay_ms=600, max_parallel_members=1):
        started = httpx.post(
            f"{base}/v1/research", json={"topic": TOPIC, "options": {"time_budget_s": 1}}
        ).json()
        await page.goto(f"{base}/#/runs/{started['thread_id']}")
        await expect(page.locator("#run-status")).to_have_attribute(
            "data-status", re.compile("completed|partial|insufficient"), timeout=WAIT_MS
        )
        rounds = httpx.get(f"{base}/v1/research/{started['thread_id']}/rounds").json()
        recorded = [s for r in rounds if r["members"] for s in r["members"]["submissions"]]
        failed = [s for s in recorded if s["status"] == "ERROR"]
        assert failed, "a member's turn came after the time budget"
        errors = page.locator(f"{MEMBER_LANES}[data-status=ERROR]")
        await expect(errors).to_have_count(len(failed), timeout=WAIT_MS)
        lanes = {x["member"]: x for x in await lanes_of(page)}
        spent = "the time budget was spent before its turn came"
        for submission in failed:
            assert lanes[submission["agent_name"]]["error"] == submission["error_message"] == spent
        await expect(errors.first.locator(".member-status")).to_have_text("ERROR")
        # The other members' lanes say how they ended too (none is left running).
        assert {x["status"] for x in lanes.values()} <= {"SUCCESS", "ERROR"}
        await page.locator("#progress-panel").evaluate("panel => { panel.open = true; }")
        await errors.first.scroll_into_view_if_needed()
        await page.screenshot(path=str(SHOTS / "members-error.png"))


async def test_a_question_under_a_finished_report_is_answered_and_its_marks_open_the_passage(
    page: Page, server: str, dialogs: list[str]
) -> None:
    thread_id = await start_run(page, server)
    await wait_for_status(page, "completed")
    await expect(page.locator("#questions")).to_be_visible(timeout=WAIT_MS)
    await page.fill("#question-input", ANSWERABLE)
    await page.click("#question-ask")
    item = page.locator("#question-list .question-item")
    await expect(item).to_have_count(1, timeout=WAIT_MS)
    await expect(item.locator(".question")).to_have_text(ANSWERABLE)
    await expect(page.locator("#question-input")).to_have_value("")
    kept = httpx.get(f"{server}/v1/research/{thread_id}/questions").json()
    assert [q["status"] for q in kept] == ["answered"]
    answer = kept[0]
    cited = [c for s in answer["sentences"] for c in s["citations"]]
    marks = item.locator(".answer a.answer-ref")
    assert await marks.all_text_contents() == [f"[{c['n']}]" for c in cited]
    for sentence in answer["sentences"]:
        await expect(item.locator(".answer")).to_contain_text(sentence["text"])
    await expect(page.locator("#report h1")).to_be_visible(timeout=WAIT_MS)
    await page.locator("#questions").scroll_into_view_if_needed()
    await page.screenshot(path=str(SHOTS / "question-answered.png"), full_page=False)

    # A mark opens the report's source dialog, the answer's passage marked in the text read.
    first, sentence = cited[0], answer["sentences"][0]["text"]
    await marks.first.click()
    panel = page.locator("#source-dialog")
    await expect(panel).to_be_visible()
    text = panel.locator(".source-text")
    await expect(text).to_be_visible(timeout=WAIT_MS)
    source = httpx.get(f"{server}/v1/research/{thread_id}/sources/{first['n']}").json()
    await expect(panel.locator("#source-title")).to_have_text(source["title"])
    assert await text.text_content() == source["text"]
    passage = source["text"][first["start"] : first["end"]]
    assert await text.locator("mark").all_text_contents() == [passage]
    await expect(panel.locator(".source-answer li")).to_have_text(sentence)
    await expect(panel.locator(".source-facts")).to_contain_text(source["content_hash"][:12])
    await page.screenshot(path=str(SHOTS / "question-source.png"), full_page=False)
    await page.keyboard.press("Escape")
    await expect(panel).to_be_hidden()
    await expect(marks.first).to_be_focused()

    # The answer is the thread's: a reload lists it again.
    await page.reload()
    await wait_for_status(page, "completed")
    await expect(item).to_have_count(1, timeout=WAIT_MS)
    assert await marks.all_text_contents() == [f"[{c['n']}]" for c in cited]
    assert dialogs == []


async def test_a_question_the_evidence_does_not_answer_offers_a_new_research_that_starts(
    page: Page, server: str, dialogs: list[str]
) -> None:
    thread_id = await start_run(page, server)
    await wait_for_status(page, "completed")
    await page.fill("#question-input", UNANSWERABLE)
    await page.press("#question-input", "Enter")
    item = page.locator("#question-list .question-item")
    await expect(item).to_have_count(1, timeout=WAIT_MS)
    await expect(item.locator(".answer")).to_contain_text("do not answer this question")
    await expect(item).not_to_contain_text("POST")  # the API's words are not the page's
    await expect(item.locator("a.answer-ref")).to_have_count(0)
    button = item.locator("button.question-research")
    await expect(button).to_have_text("Research this question")
    await expect(page.locator("#report h1")).to_be_visible(timeout=WAIT_MS)
    await page.locator("#questions").screenshot(path=str(SHOTS / "question-not-in-evidence.png"))

    await button.click()
    await page.wait_for_function("id => !location.hash.endsWith(id)", arg=thread_id)
    new_id = page.url.rsplit("/", 1)[-1]
    await expect(page.locator("#run-status")).to_have_attribute(
        "data-status", re.compile("^(completed|insufficient|partial)$"), timeout=WAIT_MS
    )
    assert httpx.get(f"{server}/v1/research/{new_id}").json()["topic"] == UNANSWERABLE
    asked = httpx.get(f"{server}/v1/research/{thread_id}/questions/1").json()
    assert asked["research_thread"] == new_id

    # Back on the asked thread, the answer leads to that run instead of offering another.
    await page.goto(f"{server}/#/runs/{thread_id}")
    await wait_for_status(page, "completed")
    link = item.locator("a.question-run")
    await expect(link).to_have_attribute("href", f"#/runs/{new_id}", timeout=WAIT_MS)
    await expect(item.locator("button.question-research")).to_have_count(0)
    assert dialogs == []


async def test_a_finished_report_downloads_as_pdf_word_and_html(
    page: Page, server: str, dialogs: list[str], tmp_path: Path
) -> None:
    thread_id = await start_run(page, server)
    await wait_for_status(page, "completed")
    markdown = httpx.get(f"{server}/v1/research/{thread_id}/report").text
    heading = re.search(r"^## (.+)$", markdown, re.M)
    assert heading
    saved = {}
    for label, file_format in (("PDF", "pdf"), ("Word", "docx"), ("HTML", "html")):
        button = page.locator(f'.download-as-file[data-format="{file_format}"]')
        await expect(button).to_have_text(label)
        await expect(button).to_be_enabled(timeout=WAIT_MS)
        async with page.expect_download(timeout=WAIT_MS) as started:
            await button.click()
        download = await started.value
        assert download.suggested_filename == f"report-{thread_id}.{file_format}"
        path = tmp_path / download.suggested_filename
        await download.save_as(path)
        saved[file_format] = path.read_bytes()
    await page.locator(".report-section .panel-head").screenshot(
        path=str(SHOTS / "report-downloads.png")
    )
    assert saved["pdf"].startswith(b"%PDF-")
    pdf_text = "\n".join(p.extract_text() for p in pypdf.PdfReader(io.BytesIO(saved["pdf"])).pages)
    assert heading.group(1) in pdf_text
    document = docx.Document(io.BytesIO(saved["docx"]))
    assert heading.group(1) in [p.text for p in document.paragraphs]
    assert saved["html"].startswith(b"<!DOCTYPE html>")
    assert f">{heading.group(1)}</h2>".encode() in saved["html"]
    await expect(page.locator("#report-error")).to_be_hidden()
    assert dialogs == []
