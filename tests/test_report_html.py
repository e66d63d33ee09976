"""`parsim plan --report DIR`: one self-contained HTML page, parsed back with the stdlib's
html.parser and checked part by part against what `parsim plan --json` and the text output say;
then laid out by a real headless browser (chromium, where installed) at 1,400 px."""

import base64
import contextlib
import html
import io
import json
import os
import shutil
import subprocess
from dataclasses import asdict
from html.parser import HTMLParser

import pytest

from parsim.cli import main
from parsim.hardware.machine import Machine
from parsim.plan import ParallelConfig
from parsim.report import validation as vreport
from parsim.fmt import human_bytes, human_time
from parsim.report.html import validation_section

MODEL = "examples/resnet50_cifar10_seeds_split.yaml"       # the quick start's model
CLUSTER = "ascend910:1x8"                                   # plan's default
MACHINE = Machine("Test CPU 9000", 4, "2.13.0+cpu", "2.4.6", "3.11.7", "2026-11-20")


class Page(HTMLParser):
    """What the tests read of the page: the title, each element's text by id, img sources by id,
    table rows (class, cells) by table id, and list items by list id."""
    VOID = {"img", "meta", "br", "hr", "link", "input"}

    def __init__(self, text: str):
        super().__init__()
        self.stack, self.text, self.src, self.rows, self.items = [], {}, {}, {}, {}
        self.title, self._table, self._list = "", None, None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.src[a["id"]] = a["src"]
        if tag in self.VOID:
            return
        self.stack.append((tag, a.get("id")))
        if a.get("id"):
            self.text[a["id"]] = ""
        if tag == "table":
            self._table = a.get("id")
            self.rows[self._table] = []
        elif tag == "tr" and self._table:
            self.rows[self._table].append((a.get("class"), []))
        elif tag in ("td", "th") and self._table:
            self.rows[self._table][-1][1].append("")
        elif tag == "ul":
            self._list = a.get("id")
            self.items[self._list] = []
        elif tag == "li" and self._list:
            self.items[self._list].append("")

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1][0] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()
        if tag == "table":
            self._table = None
        elif tag == "ul":
            self._list = None

    def handle_data(self, data):
        for tag, key in self.stack:
            if key:
                self.text[key] += data
        tag = self.stack[-1][0] if self.stack else ""
        if tag == "title":
            self.title += data
        if tag in ("td", "th") and self._table:
            self.rows[self._table][-1][1][-1] += data
        if self._list and any(t == "li" for t, _ in self.stack):
            self.items[self._list][-1] += data

    def body_rows(self, table: str):
        return [(cls, cells) for cls, cells in self.rows[table] if cls is not None and not cls.startswith("split")]

    def split_rows(self, table: str):
        """The ranked table's split lines, one below each row: (its row's class, the split)."""
        return [(cls.split()[1], cells[1].removeprefix("split: ")) for cls, cells in self.rows[table]
                if cls is not None and cls.startswith("split")]


def _run(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """`parsim plan --report --json` without a validation: the page and the JSON it agrees with."""
    folder = tmp_path_factory.mktemp("report") / "new"            # created by the command
    code, out, err = _run(["plan", MODEL, "--report", str(folder), "--json"])
    assert code == 0, err
    assert os.listdir(folder) == ["report.html"]                    # nothing else: no temporary, no image files
    return Page((folder / "report.html").read_text()), json.loads(out), (folder / "report.html").read_text()


def _config_text(c: dict) -> str:
    tp = str(c["tp"]) if c["tp"] == 1 else f"{c['tp']} {c['tp_layout']}"
    schedule = c["schedule"] + (f" v={c['chunks']}" if c["chunks"] > 1 else "")
    return " ".join([f"dp={c['dp']}", f"pp={c['pp']}", f"tp={tp}", *([f"cp={c['cp']}"] if c["cp"] > 1 else []),
                     *([f"recompute={c['recompute']}"] if c["recompute"] != "none" else []),
                     *([f"zero={c['zero']}"] if c["zero"] else []),
                     f"m={c['microbatches']}", schedule, c["placement"]])


def test_the_page_is_self_contained(planned):
    page, _, text = planned
    assert page.title == f"parsim plan: resnet50-cifar10-seeds-split on {CLUSTER}"
    # nothing runs and nothing loads: the one script block is the charts' data, JSON
    assert text.count("<script") == 1 and '<script type="application/json" id="chart-data">' in text
    assert "http://" not in text and "https://" not in text
    assert not page.stack                                          # every element closed
    for key in ("gantt", "memory", "shares"):                      # three embedded PNGs
        prefix = "data:image/png;base64,"
        assert page.src[key].startswith(prefix)
        png = base64.b64decode(page.src[key][len(prefix):], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert width >= 800 and height >= 150


def test_the_pick_comes_first_with_its_configuration_and_shares(planned):
    page, d, text = planned
    assert text.index('id="pick"') < text.index('id="why"') < text.index('id="validation"') \
        < text.index('id="ranked"') < text.index('id="charts"')
    pick = d["candidates"][0]
    assert page.text["pick-config"] == _config_text(pick)
    e = pick["estimate"]
    assert d["plan"]["estimate"]["step_time_s"] == e["step_time_s"]
    assert page.text["step"] == human_time(e["step_time_s"])
    assert page.text["throughput"] == f"{e['throughput_samples_per_s']:,.1f}"
    # the three idle/communication shares, separately, as `parsim plan` prints them
    assert page.text["bubble"] == f"{e['bubble_fraction']:.1%}"
    assert page.text["sync-wait"] == f"{e['sync_wait_fraction']:.1%}"
    assert page.text["exposed-comm"] == f"{e['exposed_comm_fraction']:.1%}"
    assert page.items["explanation"] == d["explanation"] and len(d["explanation"]) >= 3


def test_every_ranked_row_is_in_the_table(planned):
    page, d, _ = planned
    header = page.rows["ranked-table"][0][1]
    rows = page.body_rows("ranked-table")
    splits = page.split_rows("ranked-table")
    assert len(splits) == len(rows)
    shown = d["candidates"] + ([d["manual"]] if d["manual"] else [])
    assert len(rows) == len(shown) == len(d["candidates"]) + 1          # the seeds' split is the manual row
    for i, ((cls, cells), c) in enumerate(zip(rows, shown)):
        row = dict(zip(header, cells))
        manual = i == len(d["candidates"])
        assert cls == ("pick" if i == 0 else "manual" if manual else "candidate")
        assert row["#"] == ("*" if i == 0 else "manual" if manual else str(i + 1))
        assert row["recompute"] == c["recompute"] in ("none", "selective", "full")      # never blank
        assert _config_text(c) == " ".join(
            [f"dp={row['dp']}", f"pp={row['pp']}", f"tp={row['tp']}",
             *([f"cp={row['cp']}"] if row["cp"] != "1" else []),
             *([f"recompute={row['recompute']}"] if row["recompute"] != "none" else []),
             *([f"zero={row['zero']}"] if row["zero"] != "0" else []), f"m={row['m']}", row["schedule"],
             row["placement"]])
        e = c["estimate"]
        assert row["step"] == human_time(e["step_time_s"])
        assert (row["bubble"], row["sync wait"], row["exp.comm"]) == tuple(
            f"{e[k]:.1%}" for k in ("bubble_fraction", "sync_wait_fraction", "exposed_comm_fraction"))
        split_cls, split = splits[i]
        assert split_cls == cls                                      # below its own row
        names = split.replace(" | ", "|").split("|")
        assert len(names) == c["pp"] * c["chunks"]                   # one part per stage
    assert splits[0][1] == page.text["pick-split"]


def test_the_pareto_front_shows_whole_configurations(planned):
    page, d, _ = planned
    rows = [cells for _, cells in page.body_rows("pareto-table")]
    assert len(d["pareto"]) >= 2 and len(rows) == len(d["pareto"])
    for cells, c in zip(rows, d["pareto"]):
        e = c["estimate"]
        assert cells == [_config_text(c), f"{e['throughput_samples_per_s']:,.1f}",
                         human_bytes(max(e["peak_memory_bytes"]))]


def test_the_pareto_line_and_small_memories():
    from types import SimpleNamespace

    from parsim.report.cli_text import pareto_entry

    cfg = ParallelConfig(4, 2, 8, "interleaved", 2, (0, 1, 2, 3, 4), tp=2, tp_layout="megatron-sp", recompute=True,
                         zero=1, cp=2)
    cand = SimpleNamespace(config=cfg, estimate=SimpleNamespace(throughput_samples_per_s=1234.4),
                           peak_memory_bytes=3.5 * 2**20)
    assert pareto_entry(cand) == ("dp=4 pp=2 tp=2 megatron-sp cp=2 recompute=full zero=1 m=8 interleaved v=2 pp-inner "
                                  "1,234/s 3.50 MiB")
    assert [human_bytes(x) for x in (512, 1536, 3.5 * 2**20, 47.9 * 2**30)] == ["512 B", "1.50 KiB", "3.50 MiB",
                                                                                  "47.90 GiB"]


def test_without_a_validation_the_page_says_how_to_get_one(planned):
    page, _, _ = planned
    note = page.text["no-validation"]
    assert "parsim validate" in note and "--validation FILE" in note
    assert "val-mape-step" not in page.text


def _validation(folder, pick: dict, cluster="local-cpu", machine=True) -> tuple[str, list]:
    """A validation.json as `parsim validate` writes it (report.summary over Rows, then its keys),
    with two plans of the pick's kind and two of others; step errors +10%, -5%, +3%, -4%, peak
    memory +2%, -1%, 0%, -3%."""
    kind = (pick["dp"], pick["pp"], pick["schedule"])
    other = (pick["dp"] + 1, pick["pp"], pick["schedule"])
    other_schedule = "gpipe" if pick["schedule"] != "gpipe" else "1f1b"
    shapes = [("same-a", *kind, 4, 1.10, 1.02), ("other-dp", *other, 1, 0.95, 0.99),
              ("same-b", *kind, 2, 1.03, 1.00), ("other-schedule", 1, pick["pp"], other_schedule, 4, 0.96, 0.97)]
    rows = [vreport.Row(label=label, dp=dp, pp=pp, microbatches=m, schedule=schedule, split="head..layer2 | layer3..fc",
                        predicted_step_s=measured * ratio, measured_step_s=measured,
                        predicted_peak_bytes=2e8 * mem, measured_peak_bytes=2e8, predicted_compute_frac=0.8,
                        predicted_bubble_frac=0.15, predicted_exposed_comm_frac=0.05, measured_compute_frac=0.78)
            for (label, dp, pp, schedule, m, ratio, mem), measured in zip(shapes, (0.4, 0.5, 0.6, 0.7))]
    out = vreport.summary(rows)
    out.update(model="examples/resnet50_cifar10_local.yaml", cluster=cluster,
               profiles={"1": str(folder / "layers.1proc.profile.json")}, tp_profiles=[], steps=12, set="quick",
               passes=3, skipped=[], memory_breakdown=[], **({"machine": asdict(MACHINE)} if machine else {}))
    path = folder / "validation.json"
    path.write_text(json.dumps(out, default=float))
    return str(path), rows


def test_the_validation_section_shows_the_sets_errors_and_the_picks_kind(planned, tmp_path):
    _, d, _ = planned
    pick = d["candidates"][0]
    vpath, rows = _validation(tmp_path, pick)
    code, out, err = _run(["plan", MODEL, "--report", str(tmp_path), "--validation", vpath])
    assert code == 0, err
    assert f"wrote {tmp_path / 'report.html'}" in out.splitlines()
    page = Page((tmp_path / "report.html").read_text())
    # |+10%|, |-5%|, |+3%|, |-4%|: MAPE 5.5%, max 10%; memory |+2%|, |-1%|, 0, |-3%|: MAPE 1.5%
    assert page.text["val-mape-step"] == "5.5%" and page.text["val-max-step"] == "10.0%"
    assert page.text["val-mape-memory"] == "1.5%"
    caveat = page.text["val-caveat"]
    assert "validation's cluster, local-cpu" in caveat and f"this plan is for {CLUSTER}" in caveat
    facts = {cells[0]: cells[1] for _, cells in page.rows["val-facts"]}
    assert facts["validation"] == vpath and facts["cluster"] == "local-cpu"
    assert facts["measured on"] == "Test CPU 9000, 4 cores, torch 2.13.0+cpu, on 2026-11-20"
    assert facts["set"] == "quick, 4 plans, 3 pass(es) of 12 steps"
    same = [dict(zip(page.rows["val-same-kind-table"][0][1], cells))
            for _, cells in page.body_rows("val-same-kind-table")]
    assert [r["plan"] for r in same] == ["same-a", "same-b"]
    assert [(r["step error"], r["memory error"]) for r in same] == [("+10.0%", "+2.0%"), ("+3.0%", "+0.0%")]
    assert all((int(r["dp"]), int(r["pp"]), r["schedule"]) == (pick["dp"], pick["pp"], pick["schedule"])
               for r in same)
    # the page and the text output of the same run: the same summary line and explanation
    printed = out.splitlines()
    assert page.text["summary"] == printed[0] and " candidates, simulated " in printed[0]
    assert page.items["explanation"] and all(line in printed for line in page.items["explanation"])


def test_a_validation_without_a_machine_takes_its_profiles(tmp_path):
    pick = ParallelConfig(1, 2, 1, "zbh1", 1, (0, 1, 2))
    vpath, _ = _validation(tmp_path, {"dp": 1, "pp": 2, "schedule": "zbh1"}, cluster=CLUSTER, machine=False)
    bare = vreport.load_validation(vpath)
    assert bare["machine"] is None and "not recorded" in validation_section(bare, CLUSTER, pick)
    (tmp_path / "layers.1proc.profile.json").write_text(json.dumps({"machine": asdict(MACHINE)}))
    v = vreport.load_validation(vpath)
    assert v["machine"] == asdict(MACHINE) and v["machine_from"] == str(tmp_path / "layers.1proc.profile.json")
    page = Page(validation_section(v, CLUSTER, pick))
    facts = {cells[0]: cells[1] for _, cells in page.rows["val-facts"]}
    assert facts["measured on"].endswith(f"(recorded by its profile {tmp_path / 'layers.1proc.profile.json'})")
    assert f"validation's cluster, {CLUSTER}" in page.text["val-caveat"]
    assert "the cluster planned here" in page.text["val-caveat"]
    hostile = validation_section({**v, "model": "<script>x</script>&"}, CLUSTER, pick)   # text is escaped
    assert "<script" not in hostile and Page(hostile).rows["val-facts"][1][1][1] == "<script>x</script>&"
    other = Page(validation_section(v, CLUSTER, ParallelConfig(8, 1, 1, "1f1b", 1, (0, 3))))
    assert "None of the validation's plans" in other.text["val-same-kind"] and "val-same-kind-table" not in other.rows


def _unwritable(tmp_path) -> str:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):        # root writes anyway: a read-only mount instead
        folder = "/proc/sys"
        if os.access(folder, os.W_OK):
            pytest.skip("no folder here that this user cannot write")
    return os.path.join(folder, "report")


@pytest.mark.parametrize("case", ["file", "no-parent", "unwritable", "validation-alone", "not-a-validation",
                                  "plan-json"])
def test_bad_report_paths_are_one_line_before_the_search(tmp_path, monkeypatch, case):
    import parsim.search.planner as planner

    monkeypatch.setattr(planner, "plan", lambda *a, **k: pytest.fail("searched despite a bad --report"))
    a_file = tmp_path / "report.html"
    a_file.write_text("x")
    not_validation = tmp_path / "v.json"
    not_validation.write_text(json.dumps({"mape_step_time": 0.1, "max_error_step_time": 0.2}))
    plan_json = tmp_path / "plan.json"
    plan_json.write_text(json.dumps({"kind": "plan", "schema_version": 1}))
    argv, words = {
        "file": (["--report", str(a_file)], ["--report", "is a file"]),
        "no-parent": (["--report", str(tmp_path / "a" / "b")], ["--report", "does not exist"]),
        "unwritable": (["--report", _unwritable(tmp_path)], ["--report", "not writable"]),
        "validation-alone": (["--validation", str(not_validation)], ["--validation", "add --report"]),
        "not-a-validation": (["--report", str(tmp_path), "--validation", str(not_validation)],
                             ["v.json", "mape_peak_memory", "parsim validate"]),
        "plan-json": (["--report", str(tmp_path), "--validation", str(plan_json)],
                      ["plan.json", "mape_step_time", "parsim validate"]),
    }[case]
    code, out, err = _run(["plan", MODEL, *argv])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("parsim: error: ") and "Traceback" not in err
    assert all(w in err for w in words), err
    assert not (tmp_path / "report.html").is_file() or (tmp_path / "report.html").read_text() == "x"


# A real browser lays the page out: Debian's chromium (apt-get install chromium), or the one
# PARSIM_CHROMIUM names.  Without one the test is skipped, so a machine without it still passes.
CHROMIUM = os.environ.get("PARSIM_CHROMIUM") or next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
WIDTH_PX = 1400
# Injected into a copy of the page (the page itself runs nothing): once loaded, it measures the
# layout, reads the charts' JSON back as the browser parses it, and writes both into the DOM,
# which --dump-dom prints.
PROBE = """<script>addEventListener("load", () => {
  const de = document.documentElement;
  const data = JSON.parse(document.getElementById("chart-data").textContent);
  const out = {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth, innerWidth, height: de.scrollHeight,
    past: [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > de.clientWidth + 0.5)
      .map(e => e.tagName + "#" + e.id),
    wide: [...document.querySelectorAll(".wide")].filter(e => e.scrollWidth > e.clientWidth)
      .map(e => e.firstElementChild.id),
    images: [...document.images].map(i => [i.id, i.complete, i.naturalWidth, i.getBoundingClientRect().width]),
    memory: data.memory.map(r => [r.points.reduce((m, p) => Math.max(m, p[1]), -Infinity), r.estimated_peak_bytes]),
    bars: data.gantt.bars.map(b => [b[1], b[2]])};
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});</script>"""


def _chromium(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="no headless browser to lay the page out: apt-get install chromium "
                                             "(Debian), or set PARSIM_CHROMIUM")
def test_the_page_fits_1400_px_in_a_real_browser_and_its_charts_read_back(planned, tmp_path):
    from PIL import Image

    _, d, text = planned
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("</body>", PROBE + "</body>"))
    run = _chromium(tmp_path, f"--window-size={WIDTH_PX},1000", "--dump-dom", probed.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    start = run.stdout.index('<pre id="probe">') + len('<pre id="probe">')
    got = json.loads(html.unescape(run.stdout[start:run.stdout.index("</pre>", start)]))
    assert got["innerWidth"] == WIDTH_PX
    # no horizontal scroll: nothing wider than the window, no element past its right edge, no
    # table scrolling inside its box
    assert got["scrollWidth"] <= got["clientWidth"] and got["past"] == [] and got["wide"] == [], got
    # the three charts decoded, each shown whole
    assert [i[0] for i in got["images"]] == ["gantt", "memory", "shares"]
    assert all(complete and natural > 0 and 0 < shown <= got["clientWidth"]
               for _, complete, natural, shown in got["images"]), got["images"]
    # the charts' data as the browser reads it: each rank's memory tops out at its estimated peak, the
    # pick's as `parsim plan --json` has it; compute kinds on the compute stream only
    peaks = d["candidates"][0]["estimate"]["peak_memory_bytes"]
    assert [top for top, _ in got["memory"]] == pytest.approx(peaks, rel=1e-12)
    assert [peak for _, peak in got["memory"]] == peaks
    assert got["bars"] and all((kind in ("F", "B", "I", "W", "OPTIMIZER")) == (stream == "compute")
                               for stream, kind in got["bars"])
    # the screenshot at 1,400 px, the page's whole height: nothing painted in the right margin
    shot, page = tmp_path / "report-1400.png", tmp_path / "report.html"
    page.write_text(text)
    run = _chromium(tmp_path, "--hide-scrollbars", f"--window-size={WIDTH_PX},{got['height']}",
                    f"--screenshot={shot}", page.as_uri())
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    if os.environ.get("PARSIM_SCREENSHOTS"):          # a folder to keep it in, for people to look at
        shutil.copy(shot, os.environ["PARSIM_SCREENSHOTS"])
    image = Image.open(shot).convert("L")
    assert image.size == (WIDTH_PX, got["height"])
    margin = image.crop((WIDTH_PX - 60, 0, WIDTH_PX, image.size[1]))       # the page's body is 1,232 px wide
    assert margin.getextrema() == (255, 255), "something is drawn in the right margin at 1,400 px"
