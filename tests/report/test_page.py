"""``saddle report``: the page from a small experiment with published claims (known verdicts),
its Markdown and HTML agree with the claims' own comparison, a second report reuses the runs,
and the page renders in a headless browser with every figure loaded."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from report import published, render
from report.page import build
from sim.cli import main

EXPERIMENT = """
name: tiny
description: "Two systems at batch 8"
pairs: [opt-66b+opt-1.3b]
batches: [8]
sequence_length: 512
systems:
  - {system: pim-ad}
  - {system: saddle}
workload: {split: test, requests: 8, batching: continuous, seed: 0}
plot: {x: system, metric: tokens_per_s, normalize: pim-ad}
published:
  source: "a test's made-up values"
  claims:
    - {kind: mean_ratio, label: SADDLE / PIM-AD, num: saddle, den: pim-ad, value: 100.0}
    - {kind: best_count, systems: [pim-ad, saddle], best: saddle, value: 1}
compare: {reference: pim-ad}
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    spec = folder / "tiny.yaml"
    spec.write_text(EXPERIMENT)
    page = build(folder, (str(spec),), validate=False)
    md, html = render.write(page, folder)
    return folder, page, md.read_text(), html.read_text()


def _claims(folder: Path) -> list[dict]:
    import json

    import yaml
    records = json.loads((folder / "tiny" / "results.json").read_text())["runs"]
    return published.compare(yaml.safe_load(EXPERIMENT)["published"], records)


def test_the_summary_is_the_claims_comparison_with_verdicts(page):
    folder, p, md, _ = page
    claims = _claims(folder)
    assert [row[1] for row in p.summary.rows] == [c["claim"] for c in claims]
    ratio, best = p.summary.rows
    # 100x is far from any ours: the ratio differs, and says by which measured factors
    assert ratio[2] == "100" and ratio[3] == f"{claims[0]['ours']:.3g}"
    assert ratio[4] == f"{claims[0]['ours'] / 100.0:.2f}"
    assert ratio[5].startswith("differs; factors tokens per pass ")
    assert best[4] == "-"      # a count has no ratio to the published one
    assert best[5] == ("reproduced" if claims[1]["agrees"] else "differs")
    assert "| tiny | SADDLE / PIM-AD | 100 |" in md


def test_markdown_tables_are_rectangular_and_images_exist(page):
    folder, p, md, _ = page
    for block in re.findall(r"((?:^\|.*\|\n)+)", md, re.M):
        widths = {len(re.split(r"(?<!\\)\|", line)) for line in block.splitlines()}
        assert len(widths) == 1, block
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
    assert images == [i for s in p.sections for i in s.images] and images
    assert all((folder / i).is_file() for i in images)
    assert "**Each system against pim-ad**" in md


def test_html_is_self_contained(page):
    _, p, _, html = page
    assert html.count('src="data:image/png;base64,') == sum(len(s.images) for s in p.sections)
    assert not re.search(r"(src|href)=\"(https?:|//)", html)
    assert html.count("<table>") == 1 + sum(len(s.tables) for s in p.sections)


def test_a_second_report_reuses_the_runs(page):
    folder, _, md, _ = page
    runs = sorted((folder / "tiny" / "runs").iterdir())
    stamps = [r.stat().st_mtime_ns for r in runs]
    again = build(folder, (str(folder / "tiny.yaml"),), validate=False)
    assert render.markdown(again) == md
    assert [r.stat().st_mtime_ns for r in sorted((folder / "tiny" / "runs").iterdir())] == stamps


def test_the_command_writes_the_page_and_refuses_an_unknown_figure(page, tmp_path, capsys):
    folder = page[0]
    assert main(["report", "--out", str(tmp_path), "--figures", str(folder / "tiny.yaml"),
                 "--no-validation"]) == 0
    assert (tmp_path / "index.html").is_file() and (tmp_path / "report.md").is_file()
    assert "tiny: 2 runs" in capsys.readouterr().err      # the runner's summary line, as `saddle run`
    assert main(["report", "--out", str(tmp_path), "--figures", "no-such-figure"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-figure" in err[0]


def _browser() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.environ.get("SADDLE_REQUIRE_BROWSER"):
        pytest.fail("SADDLE_REQUIRE_BROWSER is set but no chromium is installed (.ci/run installs it)")
    return found


def test_the_page_renders_in_a_headless_browser(page, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no chromium (Debian package; CI installs it)")
    folder, p, _, html = page
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000"]
    url = (folder / "index.html").resolve().as_uri()
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    images = sum(len(s.images) for s in p.sections)
    assert f'<body data-images-loaded="{images}">' in dom
    assert dom.count("<table>") == html.count("<table>")
    shot = tmp_path / "page.png"
    subprocess.run(flags + ["--window-size=1280,2000", f"--screenshot={shot}", url],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_the_page_links_a_timeline_of_the_saddle_run(page):
    import json
    folder, p, md, html = page
    section, = [s for s in p.sections if s.anchor == "timeline"]
    link, = section.links
    assert link.startswith("timeline-saddle-") and f"]({link})" in md and f'href="{link}"' in html
    import gzip
    events = json.loads(gzip.decompress((folder / link).read_bytes()))["traceEvents"]
    lanes = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert any(lane.startswith("TLM") for lane in lanes) and len(events) > 100


def test_every_assumption_names_a_key_that_exists_and_shows_its_value(page, tmp_path):
    from report.page import assumptions_section
    section = assumptions_section()
    (_, table), = section.tables
    assert len(table.rows) >= 10
    capacity, = [r for r in table.rows if r[1] == "configs/systems/saddle.yaml: capacity_rule"]
    assert capacity[2] == "ridge"
    assert any(s.anchor == "assumptions" for s in page[1].sections)
    bad = tmp_path / "a.yaml"
    bad.write_text("assumptions:\n- {what: x, file: configs/manager.yaml, key: pools.nothing, doc: README.md}\n")
    with pytest.raises(Exception, match=r"a.yaml: assumptions\[0\]: configs/manager.yaml has no key 'pools.nothing'"):
        assumptions_section(bad)


def test_attaccs_own_speedups_are_read_from_the_reference_table():
    import json

    from common.paths import ROOT
    from report.page import reference_speedups
    table = reference_speedups(batches=(64,), contexts=(1024,))
    doc = json.loads((ROOT / "validation/tables/attacc_steps.json").read_text())
    rows = [dict(zip(doc["columns"], r)) for r in doc["rows"]]
    pick = {r["system"]: r["total_ns"] for r in rows if r["model"] == "opt-66b" and r["batch"] == 64
            and r["context"] == 1024 and not r["power_constraint"]}
    assert table.rows[0] == ("opt-66b", "64", f"{pick['dgx'] / pick['attacc']:.2f}")


def test_the_shipped_report_is_a_generated_page_of_every_figure():
    """docs/report/report.md is `saddle report --out docs/report`'s output: every figure's
    section, the claims table, and every image it links present beside it."""
    from common.paths import ROOT
    from report.page import FIGURES
    shipped = ROOT / "docs" / "report" / "report.md"
    text = shipped.read_text()
    assert text.startswith("# SADDLE: the paper's figures reproduced\n\n## Published claims\n")
    assert [h.split(":")[0] for h in re.findall(r"^## (fig\d+:.*)$", text, re.M)] == list(FIGURES)
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)
    assert images and all((shipped.parent / i).is_file() for i in images)
