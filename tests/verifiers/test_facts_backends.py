"""The facts verifier's search backends against scripted servers on 127.0.0.1 (real response
shapes: tests/fixtures/search_servers.py) and the local FTS5 corpus built from real files."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.search_servers import (MAXLAG, MW_NO_HITS, SEARXNG_403, SEARXNG_429, Concurrency, FakeAPI,
                                           brave_error, brave_ok, mediawiki, mediawiki_error, searxng_ok, sequence,
                                           slow, status)
from verifiers.facts._passage import Passage, SearchBackend, SourceUnavailable
from verifiers.facts.backends import (BraveBackend, LocalBackend, SearxngBackend, WikipediaBackend, aclose_backends,
                                      fts_query, make_backends)
from verifiers.facts.corpus import MAX_CHARS, build_corpus, chunk

UA = "veracity-tests/1.0 (ci@example.org)"


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


@pytest.fixture
def api():
    with FakeAPI() as a:
        yield a


def wiki(api, **kw) -> WikipediaBackend:
    return WikipediaBackend(api.url + "/w/api.php", user_agent=UA, **{"timeout_s": 2.0, **kw})


# -- wikipedia -------------------------------------------------------------------------------

async def test_wikipedia_search_then_extracts_in_rank_order(api):
    api.routes["/w/api.php"] = mediawiki()
    b = wiki(api)
    try:
        ps = await b.search("  Eiffel   Tower height ", k=3)
    finally:
        await b.aclose()
    assert [p.title for p in ps] == ["Eiffel Tower", "Gustave Eiffel", "Eiffel Tower (Paris, Tennessee)"]
    first = ps[0]
    assert "330 metres" in first.text and "\n" not in first.text
    assert first.url == "https://en.wikipedia.org/wiki/Eiffel_Tower" and first.domain == "en.wikipedia.org"
    assert first.source == "wikipedia" and first.doc_id == "wikipedia:9232" and first.published == "2024-05-01"
    # no extract for the third page: its search snippet, without the highlight markup
    assert ps[2].text.startswith("A replica of the Eiffel Tower stands") and "<" not in ps[2].text
    search, extracts = api.hits
    assert search["query"]["list"] == ["search"] and search["query"]["srsearch"] == ["Eiffel Tower height"]
    assert search["query"]["srlimit"] == ["3"] and search["query"]["formatversion"] == ["2"]
    assert search["query"]["maxlag"] == ["5"]
    assert extracts["query"]["pageids"] == ["9232|12757|4472816"]
    assert extracts["query"]["exintro"] == ["1"] and extracts["query"]["explaintext"] == ["1"]
    assert all(h["headers"]["User-Agent"] == UA for h in api.hits)


async def test_wikipedia_default_user_agent_names_project_and_contact(api):
    api.routes["/w/api.php"] = mediawiki()
    b = WikipediaBackend(api.url + "/w/api.php")
    try:
        await b.search("Eiffel", 1)
    finally:
        await b.aclose()
    ua = api.hits[0]["headers"]["User-Agent"]
    assert ua.startswith("veracity-facts/") and "contact" in ua


async def test_wikipedia_long_extract_cut_at_sentence(api):
    long = {"batchcomplete": True, "query": {"pages": [
        {"pageid": 9232, "ns": 0, "title": "Eiffel Tower", "fullurl": "https://en.wikipedia.org/wiki/Eiffel_Tower",
         "extract": " ".join(f"Sentence number {i} is about the tower." for i in range(200))}]}}
    api.routes["/w/api.php"] = mediawiki(extracts=long)
    b = wiki(api, max_chars=300)
    try:
        ps = await b.search("Eiffel", 1)
    finally:
        await b.aclose()
    assert 200 < len(ps[0].text) <= 300 and ps[0].text.endswith("tower.")


async def test_wikipedia_no_hits_is_empty_without_second_request(api):
    api.routes["/w/api.php"] = mediawiki(search=MW_NO_HITS)
    b = wiki(api)
    try:
        assert await b.search("qwxzv nonexistent", 5) == []
    finally:
        await b.aclose()
    assert len(api.hits) == 1


@pytest.mark.parametrize("route,status_code,needle", [
    (MAXLAG, 200, "maxlag"),
    (mediawiki_error("readapidenied", "You need read permission to use this module."), 200, "readapidenied"),
    (status(429, "Too many requests", headers={"Retry-After": "30"}), 429, "HTTP 429"),
    (status(503, "<html>Service Unavailable</html>", "text/html"), 503, "HTTP 503"),
    (status(200, "{\"batchcomplete\": tru", "application/json"), 200, "malformed JSON"),
    (status(200, "[1, 2]", "application/json"), 200, "shape"),
    (status(404, "Not Found"), 404, "HTTP 404"),
])
async def test_wikipedia_errors_are_source_unavailable(api, route, status_code, needle):
    api.routes["/w/api.php"] = route
    b = wiki(api, retries=0)
    try:
        with pytest.raises(SourceUnavailable) as ei:
            await b.search("Eiffel Tower", 3)
    finally:
        await b.aclose()
    assert ei.value.backend == "wikipedia" and ei.value.status == status_code and needle in str(ei.value)
    assert len(api.hits) == 1  # 429 / 503 / maxlag are not retried


async def test_wikipedia_retry_after_is_honoured_without_contacting_the_server(api):
    api.routes["/w/api.php"] = sequence(status(429, "Too many requests", headers={"Retry-After": "30"}), mediawiki())
    b = wiki(api)
    try:
        with pytest.raises(SourceUnavailable):
            await b.search("Eiffel", 3)
        with pytest.raises(SourceUnavailable, match="backing off"):
            await b.search("Eiffel", 3)
    finally:
        await b.aclose()
    assert len(api.hits) == 1


async def test_wikipedia_one_request_at_a_time(api):
    probe = Concurrency(mediawiki(), hold=0.05)
    api.routes["/w/api.php"] = probe
    b = wiki(api)
    try:
        results = await asyncio.gather(*(b.search(f"Eiffel {i}", 2) for i in range(4)))
    finally:
        await b.aclose()
    assert all(len(r) == 2 for r in results)
    assert len(api.hits) == 8 and probe.max_seen == 1
    # instances made per request share the lock of their wiki host
    probe2 = Concurrency(mediawiki(), hold=0.05)
    api.routes["/w/api.php"] = probe2
    b1, b2 = wiki(api), wiki(api)
    try:
        await asyncio.gather(b1.search("a", 1), b2.search("b", 1), b1.search("c", 1))
    finally:
        await aclose_backends([b1, b2])
    assert len(api.hits) == 8 + 6 and probe2.max_seen == 1
    # and the probe does see concurrency where there is no lock (SearXNG)
    probe3 = Concurrency(searxng_ok(), hold=0.3)
    api.routes["/search"] = probe3
    s1 = SearxngBackend(api.url + "/search")
    try:
        await asyncio.gather(s1.search("a", 1), s1.search("b", 1))
    finally:
        await s1.aclose()
    assert probe3.max_seen == 2


async def test_wikipedia_timeout(api):
    api.routes["/w/api.php"] = slow(1.5, mediawiki())
    b = wiki(api, timeout_s=0.2)
    try:
        with pytest.raises(SourceUnavailable, match="timeout"):
            await b.search("Eiffel", 3)
    finally:
        await b.aclose()


async def test_transient_502_is_retried_once(api):
    api.routes["/w/api.php"] = sequence(status(502, "Bad Gateway"), mediawiki())
    b = wiki(api)
    try:
        ps = await b.search("Eiffel", 3)
    finally:
        await b.aclose()
    assert len(ps) == 3 and len(api.hits) == 3  # 502, then search, then extracts


async def test_connection_refused_is_source_unavailable():
    b = WikipediaBackend("http://127.0.0.1:9/w/api.php", retries=1, timeout_s=1.0)
    try:
        with pytest.raises(SourceUnavailable, match="ConnectError"):
            await b.search("Eiffel", 3)
    finally:
        await b.aclose()


async def test_redirect_is_not_followed(api):
    with FakeAPI() as elsewhere:
        elsewhere.routes["/*"] = searxng_ok()
        api.routes["/w/api.php"] = status(302, "", headers={"Location": elsewhere.url + "/steal"})
        b = wiki(api)
        try:
            with pytest.raises(SourceUnavailable, match="HTTP 302"):
                await b.search("Eiffel", 3)
        finally:
            await b.aclose()
        assert elsewhere.hits == []


# -- searxng ---------------------------------------------------------------------------------

async def test_searxng_parses_results(api):
    api.routes["/search"] = searxng_ok()
    b = SearxngBackend(api.url + "/search", params={"categories": "general", "language": "en"})
    try:
        ps = await b.search("tesla q4 2023 deliveries", k=5)
    finally:
        await b.aclose()
    assert [p.domain for p in ps] == ["ir.tesla.com", "reuters.com"]  # duplicate URL and text-less result dropped
    assert ps[0].title == "Tesla Fourth Quarter 2023 Production, Deliveries & Deployments"
    assert ps[0].published == "2024-01-02" and ps[1].published is None
    assert ps[1].text == "Tesla delivered 484,507 vehicles in the fourth quarter, up 20% from a year earlier."
    assert all(p.source == "searxng" for p in ps)
    q = api.hits[0]["query"]
    assert q["q"] == ["tesla q4 2023 deliveries"] and q["format"] == ["json"] and q["categories"] == ["general"]


async def test_searxng_respects_k_and_base_url_gets_search_path(api):
    api.routes["/search"] = searxng_ok()
    b = SearxngBackend(api.url + "/")
    try:
        assert len(await b.search("tesla", k=1)) == 1
    finally:
        await b.aclose()


@pytest.mark.parametrize("route,code", [(SEARXNG_403, 403), (SEARXNG_429, 429),
                                        (status(200, "<html>not json</html>", "text/html"), 200),
                                        (status(200, '{"query": "x"}', "application/json"), 200)])
async def test_searxng_errors_are_never_evidence(api, route, code):
    api.routes["/search"] = route
    b = SearxngBackend(api.url + "/search")
    try:
        with pytest.raises(SourceUnavailable) as ei:
            await b.search("tesla", 5)
    finally:
        await b.aclose()
    assert ei.value.status == code and ei.value.backend == "searxng"


async def test_searxng_timeout(api):
    api.routes["/search"] = slow(1.5, searxng_ok())
    b = SearxngBackend(api.url + "/search", timeout_s=0.2)
    try:
        with pytest.raises(SourceUnavailable, match="timeout"):
            await b.search("tesla", 5)
    finally:
        await b.aclose()


# -- brave -----------------------------------------------------------------------------------

async def test_brave_parses_web_results_and_sends_key(api):
    api.routes["/res/v1/web/search"] = brave_ok()
    b = BraveBackend("BSA-test-key", url=api.url + "/res/v1/web/search", extra_snippets=True)
    try:
        ps = await b.search("tesla q4 2023 deliveries", k=3)
    finally:
        await b.aclose()
    assert [p.domain for p in ps] == ["ir.tesla.com", "cnbc.com"]
    assert ps[0].text == ("In the fourth quarter, we produced approximately 495,000 vehicles and delivered over "
                          "484,000 vehicles.")
    assert ps[0].published == "2024-01-02" and ps[1].published == "2024-01-03"  # page_age, else age
    assert ps[1].text.endswith("The company delivered 1.81 million vehicles in 2023.")
    h = api.hits[0]
    assert h["headers"]["X-Subscription-Token"] == "BSA-test-key"
    assert h["query"]["q"] == ["tesla q4 2023 deliveries"] and h["query"]["count"] == ["3"]
    assert h["query"]["extra_snippets"] == ["true"] and h["query"]["text_decorations"] == ["false"]


async def test_brave_without_web_section_is_empty(api):
    api.routes["/res/v1/web/search"] = brave_ok({"type": "search", "query": {"original": "x"}})
    b = BraveBackend("k", url=api.url + "/res/v1/web/search")
    try:
        assert await b.search("x", 3) == []
    finally:
        await b.aclose()


@pytest.mark.parametrize("route,code,needle", [
    (brave_error(401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid."), 401,
     "SUBSCRIPTION_TOKEN_INVALID"),
    (brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", {"Retry-After": "1"}), 429,
     "HTTP 429"),
    (brave_error(422, "VALIDATION", "Unable to validate request parameter(s)."), 422, "VALIDATION"),
    (status(200, "{\"web\": {\"results\": ", "application/json"), 200, "malformed"),
])
async def test_brave_errors_are_source_unavailable(api, route, code, needle):
    api.routes["/res/v1/web/search"] = route
    b = BraveBackend("k", url=api.url + "/res/v1/web/search")
    try:
        with pytest.raises(SourceUnavailable) as ei:
            await b.search("x", 3)
    finally:
        await b.aclose()
    assert ei.value.status == code and needle in str(ei.value)


async def test_brave_timeout(api):
    api.routes["/res/v1/web/search"] = slow(1.5, brave_ok())
    b = BraveBackend("k", url=api.url + "/res/v1/web/search", timeout_s=0.2)
    try:
        with pytest.raises(SourceUnavailable, match="timeout"):
            await b.search("x", 3)
    finally:
        await b.aclose()


# -- local corpus ----------------------------------------------------------------------------

def _pdf(path: Path, paragraphs: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Annual report")
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for para in paragraphs:
        pdf.multi_cell(0, 6, para)
        pdf.ln(6)
    pdf.output(str(path))


@pytest.fixture
def corpus_files(tmp_path: Path) -> list[Path]:
    md = tmp_path / "handbook.md"
    md.write_text("# Employee handbook\n\nIntro paragraph about the company.\n\n## Leave\n\n"
                  "Employees receive **27 days** of paid annual leave, plus public holidays.\n\n"
                  "- Parental leave is *16 weeks* at full pay.\n\n```\nleave_days: 27\n```\n", encoding="utf-8")
    html = tmp_path / "about.html"
    html.write_text("<html><head><title>About Acme</title><meta name='date' content='2023-06-30'>"
                    "<script>var revenue = 999;</script></head><body><nav>Home | Jobs</nav>"
                    "<div><p>Acme was founded in <b>1998</b> in Lyon.</p><p>It employs 4,200 people.</p></div>"
                    "<footer>Copyright</footer></body></html>", encoding="utf-8")
    txt = tmp_path / "notes.txt"
    txt.write_text("The warehouse in Porto opened in 2015.\n\nIt ships 12,000 parcels a day.\n", encoding="utf-8")
    pdf = tmp_path / "report.pdf"
    _pdf(pdf, ["Revenue in fiscal 2023 was 1.2 billion euros.", "Operating margin reached 14 percent."])
    jl = tmp_path / "kb.jsonl"
    jl.write_text(json.dumps({"id": "a1", "title": "Mont Blanc", "url": "https://www.example.org/mont-blanc",
                              "date": "2021-09-01", "text": "Mont Blanc is 4,806 metres high."}) + "\n\n"
                  + json.dumps({"title": "Danube", "text": "The Danube flows through ten countries."}) + "\n",
                  encoding="utf-8")
    return [md, html, txt, pdf, jl]


async def test_corpus_build_and_search_every_format(tmp_path, corpus_files):
    db = tmp_path / "c.sqlite3"
    st = build_corpus(corpus_files, db)
    assert st.files == 5 and st.documents == 6 and st.total_passages == st.passages  # 2 JSONL documents
    b = LocalBackend(db)
    assert isinstance(b, SearchBackend)

    (p,) = await b.search("paid annual leave days", 1)
    assert "27 days of paid annual leave" in p.text and "**" not in p.text
    assert p.title == "Employee handbook" and p.doc_id.startswith(str(corpus_files[0])) and p.source == "local"

    (p,) = await b.search("When was Acme founded?", 1)
    assert p.text.startswith("Acme was founded in 1998 in Lyon.") and p.title == "About Acme"
    assert p.published == "2023-06-30" and "var revenue" not in p.text and "Home | Jobs" not in p.text

    (p,) = await b.search("Porto warehouse", 1)
    assert "opened in 2015" in p.text

    (p,) = await b.search("fiscal 2023 revenue", 1)
    assert "1.2 billion euros" in p.text and p.doc_id.endswith("#page=1#0") and p.title == "Annual report"

    (p,) = await b.search("How high is Mont Blanc", 1)
    assert p.url == "https://www.example.org/mont-blanc" and p.domain == "example.org"
    assert p.published == "2021-09-01" and p.title == "Mont Blanc"

    assert await b.search("zeppelin", 3) == []


async def test_corpus_ranking_prefers_more_matching_terms(tmp_path):
    f = tmp_path / "k.jsonl"
    f.write_text("\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate([
        "Paris is a city. Lyon is a city too.",
        "The Eiffel Tower in Paris is 330 metres tall.",
        "Tall trees grow in Oregon.",
    ])) + "\n", encoding="utf-8")
    build_corpus([f], tmp_path / "c.db")
    ps = await LocalBackend(tmp_path / "c.db").search("How tall is the Eiffel Tower in Paris?", 3)
    assert ps[0].text.startswith("The Eiffel Tower") and len(ps) == 3


async def test_rebuild_replaces_documents_and_a_live_backend_sees_it(tmp_path, corpus_files):
    db = tmp_path / "c.sqlite3"
    first = build_corpus(corpus_files, db)
    b = LocalBackend(db)
    assert "opened in 2015" in (await b.search("Porto warehouse", 1))[0].text
    corpus_files[2].write_text("The warehouse in Porto closed in 2020.\n", encoding="utf-8")
    again = build_corpus(corpus_files, db)
    assert again.total_passages == first.total_passages
    ps = await b.search("Porto warehouse", 5)
    assert [p.text for p in ps] == ["The warehouse in Porto closed in 2020."]
    # a corpus file replaced by a new one (new inode) is read afresh
    db.unlink()
    build_corpus([corpus_files[4]], db)
    assert await b.search("Porto warehouse", 5) == []
    assert (await b.search("Danube", 1))[0].text == "The Danube flows through ten countries."


async def test_missing_corpus_at_search_time_is_source_unavailable(tmp_path, corpus_files):
    db = tmp_path / "c.sqlite3"
    build_corpus(corpus_files[:1], db)
    b = LocalBackend(db)
    db.unlink()
    with pytest.raises(SourceUnavailable) as ei:
        await b.search("leave", 1)
    assert ei.value.backend == "local"


@pytest.mark.parametrize("query", ['"', '"unbalanced quote', "AND(", "leave AND(", "*", "leav*", "NEAR",
                                   "NEAR(leave days, 2)", "title:leave", "-leave", "leave OR", "()", "^leave",
                                   "days'; DROP TABLE passages; --", "\x00leave", "ÉMPLOYEES LEAVE"])
async def test_fts5_hostile_queries_never_raise(tmp_path, corpus_files, query):
    db = tmp_path / "c.sqlite3"
    build_corpus(corpus_files, db)
    ps = await LocalBackend(db).search(query, 3)
    assert isinstance(ps, list) and all(isinstance(p, Passage) for p in ps)
    if "leave" in query.lower():
        assert any("leave" in p.text.lower() for p in ps)
    assert await LocalBackend(db).search("paid annual leave", 1)  # the corpus is intact


def test_fts_query_quotes_every_token():
    assert fts_query('NEAR(a b) "x" AND( y*') == '"near" OR "b" OR "x" OR "y"'
    assert fts_query("the and of") == '"the" OR "and" OR "of"'  # only stop words: keep them
    assert fts_query("*** ()") is None


def test_chunk_sizes():
    blocks = [("h", "Title"), ("p", "Short one."), ("p", "Short two.")] + [("p", "Word " * 400)]
    out = chunk(blocks)
    assert out[0] == "Title Short one. Short two."
    assert all(len(c) <= MAX_CHARS for c in out) and len(out) >= 3


def test_corpus_build_rejects_bad_input_when_strict_and_skips_it_otherwise(tmp_path):
    bad = tmp_path / "x.docx"
    bad.write_text("x")
    with pytest.raises(ValueError, match="unsupported file type"):
        build_corpus([bad], tmp_path / "c.db", strict=True)
    jl = tmp_path / "b.jsonl"
    jl.write_text('{"text": "ok"}\n{"title": "no text"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"b\.jsonl:2"):
        build_corpus([jl], tmp_path / "c.db", strict=True)
    with pytest.raises(OSError):
        build_corpus([tmp_path / "missing.md"], tmp_path / "c.db", strict=True)
    # without --strict: the bad parts are skipped and listed, the good line is indexed
    st = build_corpus([bad, jl, tmp_path / "missing.md"], tmp_path / "c.db")
    assert st.documents == 1
    assert [(Path(w.split(":")[0]).name, "unsupported" in why or "text" in why or "no such" in why)
            for w, why in st.skipped] == [("x.docx", True), ("b.jsonl", True), ("missing.md", True)]


def test_local_backend_requires_a_corpus(tmp_path):
    with pytest.raises(ValueError, match="no such corpus"):
        LocalBackend(tmp_path / "nope.sqlite3")
    other = tmp_path / "other.sqlite3"
    import sqlite3
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(ValueError, match="not a veracity corpus"):
        LocalBackend(other)


def test_cli_corpus_build_end_to_end(tmp_path, corpus_files):
    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "cli.sqlite3"
    r = subprocess.run([sys.executable, "-m", "proxy", "corpus", "build", *map(str, corpus_files), "--db", str(db)],
                       capture_output=True, text=True, cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "5 files, 6 documents" in r.stdout
    ps = asyncio.run(LocalBackend(db).search("parental leave weeks", 1))
    assert "16 weeks" in ps[0].text
    # a directory adds every supported file under it (the same documents again: replaced)
    again = subprocess.run([sys.executable, "-m", "proxy", "corpus", "build", str(tmp_path), "--db", str(db)],
                           capture_output=True, text=True, cwd=root, timeout=120)
    assert again.returncode == 0 and "5 files, 6 documents" in again.stdout, again.stderr
    assert again.stdout.strip().endswith(r.stdout.strip().split("; ")[1])  # same total
    # nothing indexed: exit 2, and why
    bad = subprocess.run([sys.executable, "-m", "proxy", "corpus", "build", str(tmp_path / "x.exe"), "--db", str(db)],
                         capture_output=True, text=True, cwd=root, timeout=120)
    assert bad.returncode == 2 and "unsupported file type" in bad.stderr and "nothing was indexed" in bad.stderr


# -- make_backends -----------------------------------------------------------------------------

async def test_make_backends_builds_in_order(tmp_path, corpus_files, api, monkeypatch):
    db = tmp_path / "c.sqlite3"
    build_corpus(corpus_files[:1], db)
    monkeypatch.setenv("MY_BRAVE", "BSA-x")
    api.routes["/w/api.php"] = mediawiki()
    api.routes["/search"] = searxng_ok()
    api.routes["/brave"] = brave_ok()
    bs = make_backends({"use": ["local", "wikipedia", "searxng", "brave"], "local": {"db": str(db)},
                        "wikipedia": {"url": api.url + "/w/api.php", "user_agent": UA},
                        "searxng": {"url": api.url + "/search", "categories": ["general", "news"]},
                        "brave": {"url": api.url + "/brave", "api_key_env": "MY_BRAVE", "timeout_s": 3},
                        "timeout_s": 2})
    try:
        assert [b.name for b in bs] == ["local", "wikipedia", "searxng", "brave"]
        assert all(isinstance(b, SearchBackend) for b in bs)
        assert bs[1].timeout_s == 2.0 and bs[3].timeout_s == 3.0
        results = await asyncio.gather(*(b.search("leave", 2) for b in bs))
        assert all(results)
    finally:
        await aclose_backends(bs)
    brave_hit = next(h for h in api.hits if h["path"] == "/brave")
    assert brave_hit["headers"]["X-Subscription-Token"] == "BSA-x"
    searx_hit = next(h for h in api.hits if h["path"] == "/search")
    assert searx_hit["query"]["categories"] == ["general,news"]
    assert bs[1].client.is_closed


async def test_make_backends_context_uses_request_messages():
    pytest.importorskip("verifiers.facts._context")
    (b,) = make_backends({"use": ["context"]}, context_messages=[
        {"role": "system", "content": "Tesla delivered 484,507 vehicles in Q4 2023."}])
    assert b.name == "context"
    ps = await b.search("Tesla Q4 2023 deliveries", 3)
    assert ps and "484,507" in ps[0].text


@pytest.mark.parametrize("config,needle", [
    ({"use": ["google"]}, "unknown backend 'google'"),
    ({"use": "wikipedia"}, "'use' must be a list"),
    ({"use": ["wikipedia", "wikipedia"]}, "more than once"),
    ({"use": ["local"]}, "local.db"),
    ({"use": ["local"], "local": {"db": "/nonexistent/c.sqlite3"}}, "no such corpus"),
    ({"use": ["searxng"]}, "searxng.url"),
    ({"use": ["searxng"], "searxng": {"url": "file:///etc/passwd"}}, "absolute http(s) URL"),
    ({"use": ["wikipedia"], "wikipedia": {"urll": "https://x"}}, "wikipedia.urll"),
    ({"use": ["wikipedia"], "wikipedia": {"lang": "../x"}}, "lang"),
    ({"use": ["wikipedia"], "timeout_s": 0}, "timeout_s"),
    ({"use": ["wikipedia"], "timeout_s": "5"}, "timeout_s"),
    ({"use": ["wikipedia"], "wikipedia": {"retries": -1}}, "retries"),
    ({"use": ["brave"], "brave": {"api_key_env": "VERACITY_TEST_UNSET_KEY"}}, "VERACITY_TEST_UNSET_KEY"),
    ({"use": ["brave"], "brave": {"api_key": "inline"}}, "brave.api_key"),
    ({"use": ["context"], "context": {"x": 1}}, "context.x"),
    ("not a mapping", "must be a mapping"),
])
def test_make_backends_config_errors(config, needle, monkeypatch):
    monkeypatch.delenv("VERACITY_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ValueError) as ei:
        make_backends(config)
    assert needle in str(ei.value)


def test_wikipedia_default_url_from_lang():
    (b,) = make_backends({"use": ["wikipedia"], "wikipedia": {"lang": "de"}})
    assert str(b.url) == "https://de.wikipedia.org/w/api.php"
    asyncio.run(aclose_backends([b]))


async def test_urls_in_the_query_are_never_fetched(api, tmp_path, corpus_files):
    """A query carrying a URL (as model text may) goes to the configured host as a search
    string; the URL's own server sees nothing."""
    db = tmp_path / "c.sqlite3"
    build_corpus(corpus_files[:1], db)
    with FakeAPI() as trap:
        trap.routes["/*"] = searxng_ok()
        api.routes["/w/api.php"] = mediawiki()
        api.routes["/search"] = searxng_ok()
        api.routes["/brave"] = brave_ok()
        q = f"see {trap.url}/w/api.php?action=query and {trap.url}/search"
        bs = [wiki(api), SearxngBackend(api.url + "/search"), BraveBackend("k", url=api.url + "/brave"),
              LocalBackend(db)]
        try:
            for b in bs:
                await b.search(q, 2)
        finally:
            await aclose_backends(bs)
        assert trap.hits == []
    assert {h["path"] for h in api.hits} == {"/w/api.php", "/search", "/brave"}
    assert api.hits[0]["query"]["srsearch"] == [q]


def test_html_reader_keeps_loose_text_sections_and_table_rows(tmp_path):
    from verifiers.facts.corpus import read_html

    f = tmp_path / "p.html"
    f.write_text("<html><head><title>T</title><style>p{}</style></head><body><div>Intro text "
                 "<p>Revenue grew <i>sharply</i> in 2023.</p> tail</div><h2>Section <em>two</em></h2>"
                 "<p>Body two.</p><table><tr><th>Year</th><th>Staff</th></tr><tr><td>2023</td><td>4,200</td>"
                 "</tr></table><aside>Ad</aside></body></html>", encoding="utf-8")
    (doc,) = read_html(f)
    assert doc.blocks == [("p", "Intro text"), ("p", "Revenue grew sharply in 2023."), ("p", "tail"),
                          ("h", "Section two"), ("p", "Body two."), ("p", "Year Staff"), ("p", "2023 4,200")]
    assert chunk(doc.blocks) == ["Intro text Revenue grew sharply in 2023. tail",
                                 "Section two Body two. Year Staff 2023 4,200"]
