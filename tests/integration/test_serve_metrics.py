"""``/metrics`` of ``isorag serve`` (issue 28): Prometheus text with latency histograms per stage and per route,
errors by type, and cache hits (engines per process, pattern-text embeddings), behind a key."""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

from helpers.serve import DIRECTED_BY_HEAT, films_server


@pytest.fixture(scope="module")
def served(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from films_server(neo4j_uri, milvus_uri, embedder, tmp_path_factory.mktemp("serve_metrics"))


def _value(text: str, series: str) -> float:
    m = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    assert m, f"{series} not in /metrics"
    return float(m.group(1))


def test_metrics_count_stages_errors_and_cache_hits(served: Any) -> None:
    key = served.keys["read"]
    for _ in range(3):
        assert served.post(f"/v1/kgs/{served.kg}/ask", key, json={"question": "who directed Heat",
                                                                  "pattern": DIRECTED_BY_HEAT}).status_code == 200
    served.post(f"/v1/kgs/{served.kg}/retrieve", key, json={"pattern": {"triples": []}})
    served.get("/v1/kgs/no_such_kg_x/stats", served.keys["all"])
    r = served.get("/metrics", key)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text
    assert "# TYPE isorag_stage_seconds histogram" in text and "# TYPE isorag_errors_total counter" in text
    for stage in ("embed", "vector", "graph", "total"):
        assert _value(text, f'isorag_stage_seconds_count{{route="ask",stage="{stage}"}}') >= 3
    count = _value(text, 'isorag_stage_seconds_count{route="ask",stage="total"}')
    assert _value(text, 'isorag_stage_seconds_bucket{route="ask",stage="total",le="+Inf"}') == count
    assert _value(text, 'isorag_request_seconds_count{route="/v1/kgs/{kg}/ask"}') >= 3
    assert _value(text, 'isorag_requests_total{route="/v1/kgs/{kg}/ask",status="200"}') >= 3
    assert _value(text, 'isorag_errors_total{status="422",type="PatternError"}') >= 1
    assert _value(text, 'isorag_errors_total{status="404",type="KGNotFoundError"}') >= 1
    assert _value(text, 'isorag_engine_cache_total{result="hit"}') >= 3
    # the same pattern three times: its texts were embedded once, then found in the cache
    assert _value(text, f'isorag_text_cache_total{{kg="{served.kg}",result="hit"}}') >= 2
    assert served.get("/metrics").status_code == 401
