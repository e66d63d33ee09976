"""The plan report: one self-contained HTML page (``parsim plan --report DIR``).

For people who would rather look than read: the pick first, why it was picked (the planner's
explanation) and how far to trust it (the errors of a ``parsim validate`` run), then the ranked
table as ``parsim plan`` prints it, then the pick's simulated step (Gantt chart, memory over time,
where each rank's step goes), with what each chart draws as JSON (chart_data).  Pure: values in,
a string out.  Images are base64 PNG inside the page; it loads nothing else and runs nothing (no
scripts but the JSON block, no fonts, no network).  Every text is escaped.
"""

from __future__ import annotations

import base64
import json
import math
from html import escape

from parsim.report.cli_text import config_text, shown_candidates
from parsim.fmt import human_bytes, human_time
from parsim.report.plots import gantt_figure, memory_figure, png_bytes, shares_figure
from parsim.report.timeline import bars, memory_timeline
from parsim.sim.band import band_text

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
.summary { color: #555; }
.config { font-size: 1.5em; font-weight: bold; font-family: monospace; overflow-wrap: anywhere; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8em; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 0.9em; min-width: 8em; }
.card .label { font-size: 0.8em; color: #666; } .card .value { font-size: 1.4em; font-weight: bold; }
.wide { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.8em; }
th, td { padding: 0.25em 0.4em; text-align: right; white-space: nowrap; }
th { border-bottom: 2px solid #999; white-space: normal; vertical-align: bottom; }
td.text { text-align: left; font-family: monospace; } th.text { text-align: left; }
#ranked-table td.text { white-space: normal; }   /* "interleaved v=3" may break at its space */
td.split { white-space: normal; overflow-wrap: anywhere; font-size: 0.85em; color: #555; padding-top: 0; }
tbody tr:not(.split) td { padding-bottom: 0; } tbody tr.split td { border-bottom: 1px solid #eee; }
tr.split.pick { font-weight: normal; }
tr.pick { background: #e8f0fb; font-weight: bold; } tr.manual { color: #666; }
.caveat { background: #fff6e0; border-left: 4px solid #e0a000; padding: 0.5em 0.8em; }
.none { background: #f3f3f3; border-left: 4px solid #999; padding: 0.5em 0.8em; }
figure { margin: 1em 0; } img { max-width: 100%; height: auto; } figcaption { color: #555; font-size: 0.9em; }
code { overflow-wrap: anywhere; }
"""


def share(x: float) -> str:
    """A share of the step as ``parsim plan`` prints it: 42.0%."""
    return f"{x:.1%}"


def plan_report(result, *, model: str, cluster: str, header: str, rows: list[dict], names: list[str], estimate,
                validation: dict | None = None) -> str:
    """The page.  ``result``: parsim.search.planner.PlanResult; ``header``, ``rows``: the summary
    line and the ranked table's rows as ``parsim plan`` prints them (the ranked candidates, then the
    manual split's if any, in that order); ``names``: the model's cut units, for the splits;
    ``estimate``: the pick's, simulated with its timeline; ``validation``: a validation.json as
    parsim.report.validation.load_validation reads it, or None."""
    shown = shown_candidates(result)
    pick_row, e = rows[0], estimate
    title = f"parsim plan: {model} on {cluster}"
    cards = [("step", "step", pick_row["step"]), ("band", "step, 90% band", pick_row["90% band"]),
             ("throughput", "samples/s", pick_row["samples/s"]),
             ("peak-memory", "peak memory", pick_row["peak mem"]), ("headroom", "headroom", pick_row["headroom"]),
             ("bubble", "bubble", share(e.bubble_fraction)),
             ("sync-wait", "waiting on other ranks", share(e.sync_wait_fraction)),
             ("exposed-comm", "exposed communication", share(e.exposed_comm_fraction))]
    parts = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="summary" id="summary">{escape(header)}</p>',
        '<section id="pick"><h2>The pick</h2>',
        f'<p class="config" id="pick-config">{escape(config_text(result.chosen.config))}</p>',
        f'<p>split: <code id="pick-split">{escape(result.chosen.config.describe_split(names))}</code></p>',
        '<div class="cards">' + "".join(
            f'<div class="card"><div class="label">{escape(label)}</div>'
            f'<div class="value" id="{key}">{escape(value)}</div></div>' for key, label, value in cards) + "</div>",
        f'<p class="band" id="pick-band">{escape(band_text(e.step_time_band))}</p>',
        "</section>",
        '<section id="why"><h2>Why this plan</h2><ul id="explanation">'
        + "".join(f"<li>{escape(line)}</li>" for line in result.explanation) + "</ul></section>",
        validation_section(validation, cluster, result.chosen.config),
        '<section id="ranked"><h2>Ranked plans</h2>',
        f"<p>Best first, by simulated step time; the pick is row *; "
        f"{'the last row is the model.yaml split (manual). ' if result.manual else ''}"
        "Bubble, waiting on other ranks and exposed communication are shares of the step, "
        "averaged over pipeline ranks.</p>",
        _ranked_table(rows, [c.config.describe_split(names) for c in shown], bool(result.manual)),
        "</section>",
        _pareto_section(result.pareto),
        '<section id="charts"><h2>The pick\'s step</h2>',
        _figure("gantt", gantt_figure(e), "Gantt chart of one step, per pipeline rank: its compute stream above "
                                          "(labelled where the label fits), its communication and loading below"),
        _figure("memory", memory_figure(e), "memory over the step per rank: what it holds through the step "
                                            "(parameters, gradients, optimizer state, buffers, the backward's "
                                            "workspace) plus the activations in flight; its highest point is the "
                                            "estimate's peak memory"),
        _figure("shares", shares_figure(e),
                f"where each rank's step goes; averaged over ranks: bubble {share(e.bubble_fraction)}, waiting on "
                f"other ranks {share(e.sync_wait_fraction)}, exposed communication {share(e.exposed_comm_fraction)}"),
        "</section>",
        _chart_data(e),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def _pareto_section(pareto) -> str:
    """The Pareto front of throughput against peak memory, whole configurations (plan's text line)."""
    if len(pareto) < 2:
        return ""
    body = "".join(f'<tr class="pareto">{_td(config_text(c.config), True)}'
                   f"{_td(f'{c.estimate.throughput_samples_per_s:,.1f}')}{_td(human_bytes(c.peak_memory_bytes))}</tr>"
                   for c in pareto)
    return ('<section id="pareto"><h2>Throughput against memory</h2><p>The plans no other beats on both '
            "throughput and peak memory, fastest first.</p>"
            '<div class="wide"><table id="pareto-table"><thead><tr><th class="text">plan</th><th>samples/s</th>'
            f"<th>peak mem</th></tr></thead><tbody>{body}</tbody></table></div></section>")


def chart_data(est) -> dict:
    """What the pick's charts draw, in seconds and bytes: the Gantt chart's bars (rank, stream,
    kind, name, start_s, end_s; parsim.report.timeline.bars), each rank's memory steps
    (memory_timeline) beside its estimated peak, and each rank's step by cause."""
    return {"step_s": est.step_time_s,
            "gantt": {"columns": ["rank", "stream", "kind", "name", "start_s", "end_s"],
                      "bars": [list(b) for b in bars(est.timeline.records)]},
            "memory": [{"rank": r.rank, "estimated_peak_bytes": r.peak_memory_bytes,
                        "points": [list(p) for p in points]} for r, points in zip(est.ranks, memory_timeline(est))],
            "shares": [{"rank": r.rank, "busy_s": r.busy_s, "input_s": r.input_s, "exposed_comm_s": r.exposed_comm_s,
                        "bubble_s": r.bubble_s, "sync_wait_s": r.sync_wait_s} for r in est.ranks]}


def _chart_data(est) -> str:
    """chart_data as JSON in the page, for a script or a test to read back (a JSON block is
    data, never run; '</' escaped so no text ends it early)."""
    text = json.dumps(chart_data(est), separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f'<script type="application/json" id="chart-data">{text}</script>'


def _ranked_table(rows: list[dict], splits: list[str], manual: bool) -> str:
    """The ranked table; each row's split (one name range per stage, as long as the pipeline is
    deep) on a line of its own below it, across the columns, so the table keeps its width."""
    columns = list(rows[0])
    head = "".join(f"<th>{escape(c or '#')}</th>" for c in columns)
    body = []
    for i, (row, split) in enumerate(zip(rows, splits)):
        cls = "pick" if i == 0 else "manual" if manual and i == len(rows) - 1 else "candidate"
        cells = "".join(_td(row[c], c in ("schedule", "placement")) for c in columns)
        body.append(f'<tr class="{cls}">{cells}</tr><tr class="split {cls}"><td></td>'
                    f'<td class="text split" colspan="{len(columns) - 1}">split: {escape(split)}</td></tr>')
    return (f'<div class="wide"><table id="ranked-table"><thead><tr>{head}</tr></thead><tbody>' + "".join(body)
            + "</tbody></table></div>")


def _td(value, text: bool = False) -> str:
    return f'<td class="text">{escape(str(value))}</td>' if text else f"<td>{escape(str(value))}</td>"


def _figure(key: str, fig, caption: str) -> str:
    data = base64.b64encode(png_bytes(fig)).decode("ascii")
    return (f'<figure><img id="{key}" alt="{escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def _pct(x, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "not measured"
    return f"{x:+.1%}" if signed else f"{x:.1%}"


def _machine_text(v: dict) -> str:
    m = v.get("machine")
    if not m:
        return ("not recorded: this validation.json predates parsim validate recording it, and none of the "
                "profiles it lists could be read")
    what = ", ".join(x for x in (m.get("cpu_model"), f"{m['cores']} cores" if m.get("cores") else "",
                                 f"torch {m['torch']}" if m.get("torch") else "") if x)
    return (f"{what or 'unnamed machine'}, on {m.get('date') or 'an unrecorded date'}"
            + (f" (recorded by its profile {v['machine_from']})" if v.get("machine_from") else ""))


def validation_section(v: dict | None, planned_cluster: str, pick) -> str:
    """How far to trust the prediction: the validation's errors, where they were measured, and its
    plans of the pick's kind (same dp, pp and schedule); ``pick``: the pick's ParallelConfig."""
    head = '<section id="validation"><h2>Expected error</h2>'
    if v is None:
        return (head + '<p class="none" id="no-validation">No validation given: the predictions on this page are '
                "unchecked. Run <code>parsim validate</code> (it writes OUT/validation.json, default "
                "runs/validate) and pass that file with <code>--validation FILE</code>.</p></section>")
    cluster = v.get("cluster", "")
    same = [p for p in v["plans"] if (p["dp"], p["pp"], p["schedule"]) == (pick.dp, pick.pp, pick.schedule)]
    facts = [("validation", v["path"]), ("model", v.get("model", "")), ("cluster", cluster),
             ("measured on", _machine_text(v)),
             ("set", f"{v.get('set', '?')}, {len(v['plans'])} plans, {v.get('passes', 1)} pass(es) of "
                     f"{v.get('steps', '?')} steps")]
    out = [head,
           '<div class="cards">'
           f'<div class="card"><div class="label">step time MAPE</div><div class="value" id="val-mape-step">'
           f'{_pct(v["mape_step_time"])}</div></div>'
           f'<div class="card"><div class="label">step time max error</div><div class="value" id="val-max-step">'
           f'{_pct(v["max_error_step_time"])}</div></div>'
           f'<div class="card"><div class="label">peak memory MAPE</div><div class="value" id="val-mape-memory">'
           f'{_pct(v["mape_peak_memory"])}</div></div></div>',
           f'<p class="caveat" id="val-caveat">These errors were measured on the validation\'s cluster, '
           f"{escape(cluster)}, with its profiles"
           + (f"; this plan is for {escape(planned_cluster)}, another cluster, where they may not hold."
              if cluster != planned_cluster else ", the cluster planned here.") + "</p>",
           '<table id="val-facts">' + "".join(f'<tr><th>{escape(k)}</th><td class="text">{escape(str(x))}</td></tr>'
                                             for k, x in facts) + "</table>"]
    kind = f"dp={pick.dp} pp={pick.pp} {pick.schedule}"
    if not same:
        out.append(f'<p id="val-same-kind">None of the validation\'s plans is of the pick\'s kind ({escape(kind)}).'
                   "</p>")
    else:
        out.append(f'<p id="val-same-kind">The validation\'s plans of the pick\'s kind ({escape(kind)}); tp, '
                   "micro-batches and split may differ from the pick's:</p>")
        cols = ("plan", "dp", "pp", "tp", "m", "schedule", "split", "predicted", "measured", "step error",
                "memory error")
        body = "".join(
            '<tr class="val-row">' + "".join(
                _td(x, c in ("plan", "schedule", "split")) for c, x in zip(cols, (p["label"], p["dp"], p["pp"], p.get("tp", 1), p.get("microbatches", ""),
                                       p["schedule"], p.get("split", ""), human_time(p["predicted_step_s"]),
                                       human_time(p["measured_step_s"]), _pct(p["step_error"], True),
                                       _pct(p.get("memory_error"), True)))) + "</tr>"
            for p in same)
        out.append('<table id="val-same-kind-table"><thead><tr>' + "".join(f"<th>{c}</th>" for c in cols)
                   + f"</tr></thead><tbody>{body}</tbody></table>")
    return "\n".join(out) + "</section>"

