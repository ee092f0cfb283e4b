"""The evidence explorer in headless Chromium (Debian's chromium and chromium-driver, through selenium), against a
server on loopback over the demo KG and the real stores (issue 28): a demo question asked in plain text (the learned
generator writes its pattern, as the demo trains it), its answer, and the drawn subgraph holding the answer node and
the pattern's edges; a node expanded; an entity searched; a claim verified; a wrong key's message; the page at phone
width. A screenshot is kept (its path is printed)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from helpers import ROOT
from helpers.kg import unique_kg
from helpers.serve import ThreadServer

CHROMIUM, DRIVER = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver "
                                                                  "(apt-get install chromium chromium-driver)")
pytest.importorskip("selenium", reason="needs selenium (the test extra)")
DEMO = ROOT / "engine" / "data" / "demo"


@pytest.fixture(scope="module")
def served(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine, default_generator_path
    from engine.learned.train import GeneratorSettings
    from engine.service.engines import EnginePool
    from engine.service.keys import KeyStore
    from engine.service.settings import ServiceSettings

    tmp = tmp_path_factory.mktemp("explorer")
    cfg = EngineConfig(kg=unique_kg("srvui"), neo4j=Neo4jSettings(uri=neo4j_uri), milvus=MilvusSettings(uri=milvus_uri))
    owner = Engine(cfg, llm=False, embedder=embedder)
    try:
        owner.load(DEMO / "kb.txt", progress=False)
        owner.train_generator([DEMO / "questions.jsonl", DEMO / "generator_questions.jsonl"],
                              settings=GeneratorSettings(), progress=False)
        key, _ = KeyStore(tmp / "keys.json").create([cfg.kg], "write")
        settings = ServiceSettings(port=0, keys=str(tmp / "keys.json"), state_dir=str(tmp / "state"), llm=False)
        with ThreadServer(settings, EnginePool(llm=False, embedder=embedder, config=cfg)) as srv:
            srv.kg, srv.key, srv.tmp = cfg.kg, key, tmp
            yield srv
    finally:
        default_generator_path(cfg.kg).unlink(missing_ok=True)
        owner.drop()
        owner.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                "--enable-unsafe-swiftshader", "--disable-gpu-sandbox"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()


def wait(driver: Any, cond: Any, timeout: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(cond)


def by_id(driver: Any, name: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, name)


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def use_key(driver: Any, key: str) -> None:
    box = by_id(driver, "key")
    box.clear()
    box.send_keys(key)
    css(driver, "#key-form button")[0].click()


def test_explorer(served: Any, browser: Any, tmp_path: Path) -> None:
    d = browser
    d.get(served.url + "/")
    # a wrong key: a clear message, nothing else
    use_key(d, served.key[:-2] + "xx")
    msg = wait(d, lambda d: by_id(d, "message").text)
    assert "API key was refused (401)" in msg and "not valid" in msg
    use_key(d, served.key)
    wait(d, lambda d: "version" in by_id(d, "kg-info").text)
    assert by_id(d, "message").is_displayed() is False
    assert "14,459 entities" in by_id(d, "kg-info").text

    # a demo question in plain text: the learned generator's pattern, the answer and its evidence drawn
    by_id(d, "question").send_keys("what did Burt Lancaster direct")
    css(d, "#ask-form button")[0].click()
    wait(d, lambda d: "GSD" in by_id(d, "answer-entities").text)
    assert by_id(d, "answer-text").text.startswith("The Kentuckian")
    drawn = d.execute_script("return window.explorer.drawn()")
    best = drawn[0]
    assert best["gsd"] == 0 and {"The Kentuckian", "Burt Lancaster"} <= {n["name"] for n in best["nodes"]}
    assert {r for _, r, _ in best["pattern"]} <= {r for _, r, _ in best["edges"]}  # every pattern edge is drawn
    assert ["The Kentuckian", "directed_by", "Burt Lancaster"] in best["edges"]
    assert len(css(d, "#timing span")) >= 3 and css(d, "#subgraphs .pair text.dist")  # timing bar, distances
    shot = tmp_path / "explorer-ask.png"
    d.save_screenshot(str(shot))
    print(f"\nexplorer screenshot: {shot}")

    # expand the answer node: the neighbourhood graph around it
    answer = next(g for g in css(d, "#subgraphs .pair g.n[data-eid]") if "The Kentuckian" in g.text)
    d.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", answer)
    big = wait(d, lambda d: d.execute_script("const b = window.explorer.big(); return b && b.nodes > 1 && b"))
    assert "The Kentuckian" in big["names"] and "Burt Lancaster" in big["names"]
    assert "triples shown" in by_id(d, "graph-info").text

    # search an entity by name and browse around it
    by_id(d, "search").send_keys("lancaster")
    css(d, "#search-form button")[0].click()
    hits = wait(d, lambda d: css(d, "#search-results li button"))
    assert hits[0].text.startswith("Burt Lancaster")
    hits[0].click()
    wait(d, lambda d: "Burt Lancaster:" in by_id(d, "graph-info").text)
    big = d.execute_script("return window.explorer.big()")
    assert big["nodes"] == 1 + len(set(big["names"]) - {"Burt Lancaster"}) and big["edges"] >= big["nodes"] - 1

    # a claim with its pattern
    css(d, "nav button[data-tab=claims]")[0].click()
    by_id(d, "claim").send_keys("The Kentuckian was directed by Burt Lancaster")
    css(d, "#claim-form details summary")[0].click()
    by_id(d, "claim-pattern").send_keys('{"triples": [["The Kentuckian", "directed_by", "Burt Lancaster"]]}')
    css(d, "#claim-form button")[0].click()
    wait(d, lambda d: by_id(d, "verdict-label").text)
    assert by_id(d, "verdict-label").text == "SUPPORTED"
    assert d.execute_script("return window.explorer.drawn().length") >= 1

    # readable at phone width: nothing wider than the screen
    d.set_window_size(390, 844)
    css(d, "nav button[data-tab=ask]")[0].click()
    time.sleep(0.3)
    assert d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    d.save_screenshot(str(tmp_path / "explorer-phone.png"))
    d.set_window_size(1280, 800)
