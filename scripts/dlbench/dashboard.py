"""The dashboard: a static site made from the results store (scripts/dashboard).

Pages, all plain HTML that a browser opens from disk (no server, no
network: plotly.js is written next to them once, from the plotly package):

  index.html            the overview: the latest run of each machine and its
                        verdicts against the machine's baseline (the rule of
                        scripts/compare.py, dlbench.compare), the regressions
                        flagged there, the runs over time, the families
  <family>.html         one page per family: interactive versions of
                        scripts/plot.py's figures (size sweeps with their
                        ceiling, variants per shape, network throughput per
                        batch and precision, layer profiles, peers)
  history/index.html    every stored case, with a text filter
  history/<case>.html   one case across runs, commits and machines: the
                        median per run and the band of its repetitions

A family page shows, for each machine, the latest run that has cases of
that family (a GPU kit run stores one file per family). Every page has a
machine filter (also read from the address: #machine=<slug>) that hides
the other machines' traces and rows.

`site.json` lists every page and, per chart, the names of its traces: the
tests read it to check that the browser drew what was meant."""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import plotly.offline

from dlbench import compare as cmp
from dlbench.names import NETWORKS, precision_of
from dlbench.names import split_name
from dlbench.quality import warning
from dlbench.results import Case, Results
from dlbench.store import Store, describe, summary

GB = 1e9

# family page -> (title, the ops it shows, what it answers)
FAMILIES = {
    "daxpy": ("daxpy", ("daxpy", "roofline"),
              "y = a x + y against the vector length: bandwidth of each variant and the machine's ceiling."),
    "softmax": ("softmax", ("softmax", "log_softmax"),
                "Naive against fused softmax and log-softmax: bandwidth per shape."),
    "conv": ("convolution", ("conv",), "Every convolution implementation per shape: GFLOP/s."),
    "gemm": ("gemm", ("gemm",), "Matrix multiply per precision: square sizes and the networks' shapes."),
    "copy": ("copies", ("copy",), "Host-device copies: pageable, pinned and registered memory, and overlap."),
    "networks": ("networks", NETWORKS,
                 "resnet20, mnist_cnn and mnist_lenet: images/s against batch size, per backend and precision; "
                 "peers dashed."),
    "profiles": ("layer profiles", tuple(f"{n}_layer" for n in NETWORKS),
                 "Where a pass's time goes: each layer's median time per backend and batch."),
    "peers": ("peers", NETWORKS,
              "Our best row against what users would run instead (PyTorch, ONNX Runtime, OpenVINO), per batch."),
    "training": ("training", tuple(f"{n}_{kind}" for n in NETWORKS for kind in ("train", "load")),
                 "Training steps: images/s per backend and batch, where a step's time goes (forward, backward, "
                 "optimizer), and the data loader against its threads."),
}


def slug(text: str) -> str:
    """A file name for a case or family: '/' as '__', ':' as '-' (case names
    have neither '__' nor '-', so two names never meet), anything else
    outside [A-Za-z0-9._] as '_'."""
    text = text.replace("/", "__").replace(":", "-")
    return re.sub(r"[^A-Za-z0-9._-]", "_", text) or "_"


@dataclass
class Chart:
    id: str
    figure: go.Figure
    machines: list[str]  # one per trace: the trace's machine ("" for none)

    def trace_names(self) -> list[str]:
        return [t.name for t in self.figure.data]


@dataclass
class Page:
    path: str  # relative to the site
    title: str
    charts: list[Chart] = field(default_factory=list)
    body: list = field(default_factory=list)  # HTML blocks and charts in order; other charts follow
    machines: set[str] = field(default_factory=set)


# -- the data ----------------------------------------------------------------------------------------


@dataclass
class Run:
    id: int
    info: dict
    results: Results

    @property
    def machine(self) -> str:
        return self.info["machine"] or "?"


class Data:
    """What the site is made from, read once from the store."""

    def __init__(self, store: Store, machine: str | None = None):
        self.store = store
        self.rows = store.list_runs(machine=machine)
        self.runs: dict[int, Run] = {}
        for r in self.rows:
            self.runs[r["id"]] = Run(r["id"], store.run_info(r["id"]), store.results(r["id"]))
        self.machines = sorted({run.machine for run in self.runs.values()})

    def latest(self) -> dict[str, Run]:
        """The latest run of each machine (list_runs is oldest first)."""
        out: dict[str, Run] = {}
        for r in self.rows:
            out[self.runs[r["id"]].machine] = self.runs[r["id"]]
        return out

    def latest_with(self, ops: tuple[str, ...], peers: bool = False) -> list[Run]:
        """Per machine, the latest run with cases of any of `ops` (peers: with peer cases of them)."""
        out: dict[str, Run] = {}
        for r in self.rows:
            run = self.runs[r["id"]]
            if any(c.op in ops and (c.is_peer or not peers) for c in run.results.cases.values()):
                out[run.machine] = run
        return [out[m] for m in sorted(out)]

    def case_names(self) -> list[str]:
        return sorted({n for run in self.runs.values() for n in run.results.cases})


# -- the charts ---------------------------------------------------------------------------------------


def _median(case: Case, metric: str, scale: float = 1.0) -> float | None:
    if case.error is not None or not case.runs:
        return None
    if metric == "seconds":
        m = case.median_seconds()
    else:
        m = case.median(metric)
    return None if m is None or not math.isfinite(m) else m / scale


def _layout(fig: go.Figure, title: str, x: str, y: str, logx=False, logy=False, height=460) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=60, r=20, t=50, b=60),
                      legend=dict(font=dict(size=10)), hovermode="closest", template="none",
                      plot_bgcolor="white", paper_bgcolor="white")
    fig.update_xaxes(title=x, type="log" if logx else None, gridcolor="#e5e5e5", linecolor="#888")
    fig.update_yaxes(title=y, type="log" if logy else None, gridcolor="#e5e5e5", linecolor="#888")
    return fig


class ChartBuilder:
    """Collects traces and the machine of each."""

    def __init__(self, runs: list[Run]):
        self.fig = go.Figure()
        self.machines: list[str] = []
        self.many = len({r.machine for r in runs}) > 1

    def name(self, run: Run, label: str) -> str:
        return f"{label} ({run.machine})" if self.many else label

    def add(self, run: Run | None, trace) -> None:
        self.fig.add_trace(trace)
        self.machines.append(run.machine if run is not None else "")

    def chart(self, chart_id: str) -> Chart | None:
        return Chart(chart_id, self.fig, self.machines) if self.fig.data else None


def sweep_chart(chart_id: str, runs: list[Run], op: str, x_arg: str, metric: str, scale: float, title: str,
                x_title: str, y_title: str, select=None, ceiling: str | None = None, logx: bool = True) \
        -> Chart | None:
    """One line per (machine, variant): `metric` against the size argument."""
    b = ChartBuilder(runs)
    for run in runs:
        by_variant: dict[str, list[Case]] = {}
        for c in run.results.family(op):
            if x_arg in c.args and (select is None or select(c)):
                by_variant.setdefault(c.variant, []).append(c)
        for variant, cs in sorted(by_variant.items()):
            cs.sort(key=lambda c: c.args[x_arg])
            ys = [_median(c, metric, scale) for c in cs]
            b.add(run, go.Scatter(x=[c.args[x_arg] for c in cs], y=ys, mode="lines+markers",
                                  name=b.name(run, variant), line=dict(dash="dash" if c.is_peer else None),
                                  hovertemplate=f"{variant}<br>{x_arg}=%{{x}}<br>%{{y:.4g}}<extra></extra>"))
        if ceiling:
            # The ceiling measured around each repetition (bracketed), per size.
            points = {}
            for cs in by_variant.values():
                for c in cs:
                    if c.device == "cpu" and (v := _median(c, ceiling, scale)) is not None:
                        points.setdefault(c.args[x_arg], []).append(v)
            if points:
                xs = sorted(points)
                b.add(run, go.Scatter(x=xs, y=[statistics.median(points[x]) for x in xs], mode="lines",
                                      name=b.name(run, "ceiling (triad around each repetition)"),
                                      line=dict(dash="dot", color="black")))
    fig_chart = b.chart(chart_id)
    if fig_chart:
        _layout(fig_chart.figure, title, x_title, y_title, logx=logx, logy=True)
    return fig_chart


def roofline_lines(chart: Chart | None, runs: list[Run], metric: str, scale: float, names: tuple[str, ...]) -> None:
    """Adds each run's roofline ceilings as horizontal lines across the chart."""
    if chart is None:
        return
    xs = [x for t in chart.figure.data for x in (t.x or ()) if x is not None]
    if not xs:
        return
    lo, hi = min(xs), max(xs)
    many = len({r.machine for r in runs}) > 1
    for run in runs:
        for name in names:
            c = next((c for c in run.results.family("roofline") if c.name.startswith(name + "/")), None)
            if c is None or (v := _median(c, metric, scale)) is None:
                continue
            label = f"{name} ceiling" + (f" ({run.machine})" if many else "")
            chart.figure.add_trace(go.Scatter(x=[lo, hi], y=[v, v], mode="lines", name=label,
                                              line=dict(dash="longdash", width=1)))
            chart.machines.append(run.machine)


def shape_label(case: Case, skip: tuple[str, ...] = ()) -> str:
    return " ".join(f"{k}:{v}" for k, v in case.args.items() if k not in skip)


def shapes_chart(chart_id: str, runs: list[Run], op: str, metric: str, scale: float, title: str, y_title: str,
                 select=None, logy=True) -> Chart | None:
    """Grouped bars: x the shape, one bar per (machine, variant)."""
    b = ChartBuilder(runs)
    order: list[str] = []
    for run in runs:
        by_variant: dict[str, dict[str, float | None]] = {}
        for c in run.results.family(op):
            if select is not None and not select(c):
                continue
            label = shape_label(c)
            if label not in order:
                order.append(label)
            by_variant.setdefault(c.variant, {})[label] = _median(c, metric, scale)
        for variant, values in sorted(by_variant.items()):
            xs = [s for s in order if s in values]
            b.add(run, go.Bar(x=xs, y=[values[s] for s in xs], name=b.name(run, variant),
                              hovertemplate=f"{variant}<br>%{{x}}<br>%{{y:.4g}}<extra></extra>"))
    chart = b.chart(chart_id)
    if chart:
        _layout(chart.figure, title, "shape", y_title, logy=logy)
        chart.figure.update_layout(barmode="group")
        chart.figure.update_xaxes(categoryorder="array", categoryarray=order)
    return chart


def network_chart(chart_id: str, runs: list[Run], network: str, what: str = "images/s against batch size") \
        -> Chart | None:
    """images/s against batch, one line per (machine, variant), grouped in
    the legend by precision; peers dashed."""
    b = ChartBuilder(runs)
    for run in runs:
        by_variant: dict[str, list[Case]] = {}
        for c in run.results.family(network):
            if "batch" in c.args:
                by_variant.setdefault(c.variant, []).append(c)
        for variant, cs in sorted(by_variant.items(), key=lambda kv: (precision_of(kv[0]), kv[0])):
            cs.sort(key=lambda c: c.args["batch"])
            precision = precision_of(variant)
            acc = [c.median("accuracy") for c in cs]
            b.add(run, go.Scatter(
                x=[c.args["batch"] for c in cs], y=[_median(c, "items_per_second") for c in cs],
                mode="lines+markers", name=b.name(run, variant), legendgroup=precision,
                legendgrouptitle_text=precision, customdata=[[a if a is not None else float("nan")] for a in acc],
                line=dict(dash="dash" if cs[0].is_peer else None),
                hovertemplate=(f"{variant} ({precision})<br>batch %{{x}}<br>%{{y:.4g}} images/s"
                               "<br>accuracy %{customdata[0]:.4f}<extra></extra>")))
    chart = b.chart(chart_id)
    if chart:
        _layout(chart.figure, f"{network}: {what}", "batch (images per call)", "images/s",
                logx=True, logy=True, height=520)
        chart.figure.update_xaxes(type="log", dtick=math.log10(2))
    return chart


def profile_charts(runs: list[Run], network: str) -> list[Chart]:
    """Per batch, each layer's median time (us): one bar series per (machine, variant)."""
    groups: dict[int, list[tuple[Run, str, list[Case]]]] = {}
    for run in runs:
        by: dict[tuple[int, str], list[Case]] = {}
        for c in run.results.family(f"{network}_layer"):
            if "layer" in c.args:
                by.setdefault((c.args.get("batch", 0), c.variant), []).append(c)
        for (batch, variant), cs in sorted(by.items()):
            groups.setdefault(batch, []).append((run, variant, sorted(cs, key=lambda c: c.args["layer"])))
    charts = []
    for batch, series in sorted(groups.items()):
        b = ChartBuilder([run for run, _, _ in series])
        order: list[str] = []
        for run, variant, cs in series:
            labels = []
            for c in cs:
                text = str(c.runs[0].get("label", "")) if c.runs else ""
                labels.append(f"{c.args['layer']}: {text.split(' ')[0] or 'layer'}")
            order += [lab for lab in labels if lab not in order]
            b.add(run, go.Bar(x=labels, y=[_median(c, "seconds", 1e-6) for c in cs], name=b.name(run, variant),
                              hovertemplate=f"{variant}<br>%{{x}}<br>%{{y:.4g}} us<extra></extra>"))
        chart = b.chart(f"{network}-layers-batch{batch}")
        if chart:
            _layout(chart.figure, f"{network} at batch {batch}: time per layer", "layer", "median us per pass",
                    logy=True)
            chart.figure.update_layout(barmode="group")
            chart.figure.update_xaxes(categoryorder="array", categoryarray=order)
            charts.append(chart)
    return charts


def peers_chart(chart_id: str, runs: list[Run], network: str) -> Chart | None:
    """Per batch: our best CPU and GPU rows (any precision, and fp32) and each peer, in images/s."""
    b = ChartBuilder(runs)
    for run in runs:
        cases = [c for c in run.results.family(network) if "batch" in c.args]
        if not any(c.is_peer for c in cases):
            continue
        series: dict[str, dict[int, tuple[float, str]]] = {}
        for c in cases:
            v = _median(c, "items_per_second")
            if v is None:
                continue
            keys = [c.variant] if c.is_peer else [f"ours best {c.device} fp32"] if precision_of(c.variant) == "fp32" \
                else []
            if not c.is_peer:
                keys.append(f"ours best {c.device}")
            for key in keys:
                best = series.setdefault(key, {}).get(c.args["batch"])
                if best is None or v > best[0]:
                    series[key][c.args["batch"]] = (v, c.variant)
        for key in sorted(series, key=lambda k: (not k.startswith("ours"), k)):
            pts = sorted(series[key].items())
            b.add(run, go.Bar(x=[str(bt) for bt, _ in pts], y=[v for _, (v, _) in pts], name=b.name(run, key),
                              customdata=[[var] for _, (_, var) in pts],
                              hovertemplate=f"{key}<br>batch %{{x}}<br>%{{y:.4g}} images/s<br>%{{customdata[0]}}"
                                            "<extra></extra>"))
    chart = b.chart(chart_id)
    if chart:
        _layout(chart.figure, f"{network}: ours against the peers", "batch", "images/s", logy=True)
        chart.figure.update_layout(barmode="group")
        chart.figure.update_xaxes(type="category")
    return chart


PHASES = (("forward_us", "forward"), ("backward_us", "backward"), ("optimizer_us", "optimizer"))


def phases_chart(chart_id: str, runs: list[Run], op: str) -> Chart | None:
    """Where a training step's time goes: stacked bars of the phase counters
    (us per step), one bar per (variant, batch); one trace per (machine, phase)."""
    b = ChartBuilder(runs)
    for run in runs:
        cases = sorted((c for c in run.results.family(op) if "batch" in c.args and c.error is None and c.runs),
                       key=lambda c: (c.variant, c.args["batch"]))
        if not cases:
            continue
        xs = [f"{c.variant} b{c.args['batch']}" + (f" ({run.machine})" if b.many else "") for c in cases]
        for key, label in PHASES:
            ys = [c.median(key) for c in cases]
            if any(y is not None for y in ys):
                b.add(run, go.Bar(x=xs, y=ys, name=b.name(run, label),
                                  hovertemplate=f"{label}<br>%{{x}}<br>%{{y:.4g}} us<extra></extra>"))
    chart = b.chart(chart_id)
    if chart:
        _layout(chart.figure, f"{op}: where a step's time goes", "backend and batch", "us per step")
        chart.figure.update_layout(barmode="stack")
    return chart


def generic_chart(chart_id: str, runs: list[Run], op: str) -> Chart | None:
    """Any other op: the median time of each case."""
    b = ChartBuilder(runs)
    for run in runs:
        cs = sorted(run.results.family(op), key=lambda c: c.name)
        if cs:
            b.add(run, go.Bar(x=[split_name(c.name).rest for c in cs], y=[_median(c, "seconds", 1e-6) for c in cs],
                              name=b.name(run, op)))
    chart = b.chart(chart_id)
    if chart:
        _layout(chart.figure, f"{op}: median time per call", "case", "us", logy=True)
    return chart


def _is_square(c: Case) -> bool:
    return len({c.args.get("m"), c.args.get("n"), c.args.get("k")}) == 1


def family_charts(family: str, runs: list[Run]) -> list[Chart]:
    charts: list[Chart | None] = []
    if family == "daxpy":
        ch = sweep_chart("daxpy-sweep", runs, "daxpy", "n", "bytes_per_second", GB, "daxpy: bandwidth against n",
                         "n (elements)", "GB/s", ceiling="ceiling_bytes_per_second")
        roofline_lines(ch, runs, "bytes_per_second", GB, ("roofline/cpu_triad", "roofline/gpu_triad"))
        charts.append(ch)
    elif family == "softmax":
        for op in ("softmax", "log_softmax"):
            charts.append(shapes_chart(f"{op}-shapes", runs, op, "bytes_per_second", GB,
                                       f"{op}: bandwidth per shape", "GB/s"))
    elif family == "conv":
        charts.append(shapes_chart("conv-shapes", runs, "conv", "flops", 1e9, "conv: GFLOP/s per shape", "GFLOP/s"))
    elif family == "gemm":
        charts.append(sweep_chart("gemm-square", runs, "gemm", "m", "flops", 1e9, "gemm: square sizes",
                                  "m = n = k", "GFLOP/s", select=_is_square))
        charts.append(shapes_chart("gemm-shapes", runs, "gemm", "flops", 1e9, "gemm: the networks' shapes",
                                   "GFLOP/s", select=lambda c: not _is_square(c)))
    elif family == "copy":
        ch = sweep_chart("copy-sweep", runs, "copy", "bytes", "bytes_per_second", GB, "copies: bandwidth against size",
                         "bytes per copy", "GB/s")
        charts.append(ch)
    elif family == "networks":
        charts += [network_chart(f"{n}-batch", runs, n) for n in NETWORKS]
    elif family == "profiles":
        charts += [c for n in NETWORKS for c in profile_charts(runs, n)]
    elif family == "peers":
        charts += [peers_chart(f"{n}-peers", runs, n) for n in NETWORKS]
    elif family == "training":
        for n in NETWORKS:
            charts.append(network_chart(f"{n}_train-batch", runs, f"{n}_train", "training images/s against batch"))
            charts.append(phases_chart(f"{n}_train-phases", runs, f"{n}_train"))
            for batch in sorted({c.args.get("batch") for r in runs for c in r.results.family(f"{n}_load")}):
                charts.append(sweep_chart(
                    f"{n}_load-batch{batch}", runs, f"{n}_load", "threads", "items_per_second", 1.0,
                    f"{n}: loading batches of {batch} (crop and flip) against loader threads", "loader threads",
                    "images/s", select=lambda c, b=batch: c.args.get("batch") == b, logx=False))
    return [c for c in charts if c is not None]


# -- the pages ----------------------------------------------------------------------------------------


def esc(value) -> str:
    return html.escape("" if value is None else str(value))


def table(headers: list[str], rows: list[tuple[str, list[str]]], table_id: str) -> str:
    """rows: (machine, cells already escaped); each row carries its machine for the filter."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(f'<tr data-machine="{esc(m)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
                   for m, cells in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fmt_time(seconds: float | None) -> str:
    return cmp.fmt_time(seconds, False)


def history_path(case_name: str) -> str:
    return f"history/{slug(case_name)}.html"


def _rel(from_page: str, to_page: str) -> str:
    depth = from_page.count("/")
    return "../" * depth + to_page


def noisy_note(runs: list[Run]) -> str:
    """A warning paragraph for each run whose cases are flagged noisy
    (dlbench.quality's rule, as every script that reads a run says it)."""
    lines = []
    for run in runs:
        line = warning(run.results, file=run.info.get("source") or f"the file of run {run.id}")
        if line:
            lines.append(f'<p class="warning">Warning: {esc(line)}</p>')
    return f'<div id="noisy">{"".join(lines)}</div>' if lines else ""


def regressions(data: Data) -> tuple[list[dict], dict[str, dict]]:
    """The verdicts of each machine's latest run against its baseline
    (dlbench.compare's rule with its default options): the flagged rows and
    a per-machine summary."""
    flagged, per_machine = [], {}
    for machine, run in sorted(data.latest().items()):
        base_id = data.store.baseline(run.id)
        if base_id is None or base_id not in data.runs:
            per_machine[machine] = {"baseline": None}
            continue
        base = data.runs[base_id]
        try:
            verdicts = cmp.compare(base.results, run.results)
        except cmp.CompareError as e:
            per_machine[machine] = {"baseline": base_id, "error": str(e)}
            continue
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[v.verdict] = counts.get(v.verdict, 0) + 1
            if v.regression or v.rerun:
                flagged.append({"machine": machine, "run": run.id, "baseline": base_id, "verdict": v})
        per_machine[machine] = {"baseline": base_id, "counts": counts,
                                "regressions": sum(v.regression for v in verdicts),
                                "reruns": sum(v.rerun for v in verdicts)}
    flagged.sort(key=lambda f: (not f["verdict"].regression, f["machine"], -(f["verdict"].change or 0.0)))
    return flagged, per_machine


def overview(data: Data, families: list[tuple[str, int]]) -> Page:
    page = Page("index.html", "dlbench results")
    flagged, verdicts = regressions(data)
    latest = dict(sorted(data.latest().items()))
    rows = []
    for machine, run in sorted(latest.items()):
        i, v = run.info, verdicts[machine]
        if v.get("baseline") is None:
            verdict = "no baseline: no earlier run of this machine with a case in common"
        elif "error" in v:
            verdict = esc(v["error"])
        else:
            c = v["counts"]
            verdict = (f"against run {v['baseline']}: {v['regressions']} regressions, {v['reruns']} to rerun (noisy), "
                       f"{c.get('faster', 0)} faster, {c.get('same', 0)} same, {c.get('new', 0)} new, "
                       f"{c.get('gone', 0)} gone")
        rows.append((machine, [esc(machine), str(run.id), esc((i.get("git_commit") or "")[:12]),
                               esc(i.get("started_at") or i.get("date")), esc(i.get("cpu_model")),
                               esc(i.get("cpu_vector_isa")), esc(i.get("gpu_name") or "-"),
                               str(len(run.results.cases)), str(len(run.results.errored())), verdict]))
        page.machines.add(machine)
    page.body.append("<h2>Latest run per machine</h2>" + table(
        ["machine", "run", "commit", "started (UTC)", "CPU", "ISA", "GPU", "cases", "errored", "against baseline"],
        rows, "latest") + noisy_note(list(latest.values())))
    frows = [("", [f'<a href="{slug(f)}.html">{esc(FAMILIES[f][0] if f in FAMILIES else f)}</a>', str(n),
                   esc(FAMILIES[f][2] if f in FAMILIES else "")]) for f, n in families]
    page.body.append("<h2>Families</h2>" + table(["family", "cases", "what it answers"], frows, "families"))
    # The runs over time, one marker series per machine.
    b = ChartBuilder([])
    for machine in data.machines:
        rs = [data.runs[r["id"]] for r in data.rows if data.runs[r["id"]].machine == machine]
        b.add(rs[0], go.Scatter(
            x=[r.info.get("started_at") for r in rs], y=[len(r.results.cases) for r in rs], mode="markers",
            name=machine, marker=dict(size=9),
            customdata=[[r.id, (r.info.get("git_commit") or "")[:12]] for r in rs],
            hovertemplate=f"{machine}<br>run %{{customdata[0]}} at %{{x}}<br>commit %{{customdata[1]}}"
                          "<br>%{y} cases<extra></extra>"))
    chart = b.chart("runs")
    if chart:
        _layout(chart.figure, "Stored runs: when, and how many cases", "started (UTC)", "cases in the run",
                height=380)
        page.charts.append(chart)
        page.body.append(chart)
    if flagged:
        frows = []
        for f in flagged:
            v = f["verdict"]
            frows.append((f["machine"], [
                esc(f["machine"]), f'<a href="{esc(history_path(v.name))}">{esc(v.name)}</a>',
                "rerun (noisy)" if v.rerun else "slower", f"{v.change:+.1%}" if v.change is not None else "-",
                esc(fmt_time(v.base_median)), esc(fmt_time(v.new_median)),
                f"{v.p_value:.2g}" if v.p_value is not None else "-", esc(v.noisy or v.note)]))
        flagged_table = table(["machine", "case", "verdict", "change", "baseline", "latest", "p", "note"], frows,
                              "regressions")
        page.body.append(f"<h2>Flagged regressions ({len(flagged)})</h2><details{' open' if len(frows) <= 30 else ''}>"
                         "<summary>Slower than the machine's baseline (regressions first, then slowdowns measured on "
                         f"a disturbed machine, to rerun)</summary>{flagged_table}</details>")
    else:
        without = sorted(m for m, v in verdicts.items() if v.get("baseline") is None)
        if without and len(without) == len(verdicts):
            # Nothing was compared: "None" would read as "no regression".
            page.body.append('<h2>Flagged regressions</h2><p id="regressions">No baseline: no machine has an earlier '
                             "stored run with a case in common, nor a pinned one, so nothing was compared. Store "
                             "another run of the same machine (scripts/results ingest FILE) or pin one "
                             "(scripts/results pin RUN).</p>")
        else:
            page.body.append('<h2>Flagged regressions</h2><p id="regressions">None: no latest run is slower than its '
                             "baseline by the rule of scripts/compare.py"
                             + (f" (no baseline, not compared: {esc(', '.join(without))})" if without else "")
                             + ".</p>")
    return page


def family_page(family: str, data: Data) -> Page:
    title, ops, answers = FAMILIES.get(family, (family, (family,), ""))
    runs = data.latest_with(ops, peers=family == "peers")
    page = Page(f"{slug(family)}.html", title)
    page.machines = {r.machine for r in runs}
    page.charts = family_charts(family, runs) if family in FAMILIES else \
        [c for c in [generic_chart(f"{slug(family)}-cases", runs, family)] if c]
    rows = [(r.machine, [esc(r.machine), str(r.id), esc((r.info.get("git_commit") or "")[:12]),
                         esc(r.info.get("started_at")), str(sum(c.op in ops for c in r.results.cases.values()))])
            for r in runs]
    page.body.append(f"<p>{esc(answers)}</p>" + table(["machine", "run shown", "commit", "started (UTC)", "cases"],
                                                       rows, "runs") + noisy_note(runs))
    if not page.charts:
        page.body.append('<p class="empty">No cases of this family with times in the stored runs.</p>')
    cases = sorted({c.name for r in runs for c in r.results.cases.values() if c.op in ops})
    links = "".join(f'<li><a href="{esc(history_path(n))}">{esc(n)}</a></li>' for n in cases)
    page.body.append(f"<details><summary>History of each case ({len(cases)})</summary><ul>{links}</ul></details>")
    return page


def history_pages(data: Data) -> list[Page]:
    """history/index.html and one page per case: per machine, the median of
    each run with the band of its repetitions (min to max)."""
    points: dict[str, list[tuple[Run, Case]]] = {}
    for r in data.rows:
        run = data.runs[r["id"]]
        for name, case in run.results.cases.items():
            points.setdefault(name, []).append((run, case))
    pages = []
    index_rows = []
    for name in sorted(points):
        page = Page(history_path(name), name)
        b = ChartBuilder([])
        rows = []
        for machine in sorted({run.machine for run, _ in points[name]}):
            pts = [(run, case, summary(case)) for run, case in points[name] if run.machine == machine]
            page.machines.add(machine)
            xs = [run.info.get("started_at") for run, _, _ in pts]
            lo = [s["min_s"] * 1e6 if s["min_s"] is not None else None for _, _, s in pts]
            hi = [s["max_s"] * 1e6 if s["max_s"] is not None else None for _, _, s in pts]
            band_run = pts[0][0]
            b.add(band_run, go.Scatter(x=xs + xs[::-1], y=hi + lo[::-1], fill="toself", mode="lines",
                                       line=dict(width=0), opacity=0.25, name=f"{machine}: repetitions' range",
                                       hoverinfo="skip"))
            b.add(band_run, go.Scatter(
                x=xs, y=[s["median_s"] * 1e6 if s["median_s"] is not None else None for _, _, s in pts],
                mode="lines+markers", name=f"{machine}: median",
                customdata=[[run.id, (run.info.get("git_commit") or "")[:12], s["repetitions"]] for run, _, s in pts],
                hovertemplate="run %{customdata[0]}, commit %{customdata[1]}<br>%{x}<br>median %{y:.4g} us over "
                              "%{customdata[2]} repetitions<extra></extra>"))
            for run, case, s in pts:
                rows.append((machine, [esc(machine), str(run.id), esc((run.info.get("git_commit") or "")[:12]),
                                       esc(run.info.get("started_at")), esc(fmt_time(s["median_s"])),
                                       "-" if s["rel_mad"] is None else f"{s['rel_mad']:.1%}", str(s["repetitions"]),
                                       esc(case.error or "")]))
        chart = b.chart("history")
        if chart:
            _layout(chart.figure, f"{name}: time per call across runs", "run started (UTC)", "us per call",
                    height=420)
            page.charts.append(chart)
        page.body.append(table(["machine", "run", "commit", "started (UTC)", "median", "rel. MAD", "repetitions",
                                "error"], rows, "points"))
        pages.append(page)
        index_rows.append((name, len(points[name]), sorted(page.machines)))
    index = Page("history/index.html", "History of every case")
    index.machines = set(data.machines)
    items = "".join(f'<li data-machine="{esc(" ".join(ms))}" data-name="{esc(n)}">'
                    f'<a href="{esc(slug(n))}.html">{esc(n)}</a> <span class="muted">({k} runs)</span></li>'
                    for n, k, ms in index_rows)
    index.body.append('<p><label>Case name contains <input id="case-filter" type="search" size="40"></label> '
                      f'<span id="case-count">{len(index_rows)}</span> cases</p><ul id="cases">{items}</ul>')
    return [index] + pages


STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 1.5em 2em; color: #222; }
nav { padding: .6em 0; border-bottom: 1px solid #ddd; margin-bottom: 1em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; font-size: 90%; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.chart { width: 100%; min-height: 380px; margin-bottom: 1.5em; }
.muted { color: #888; }
.warning { color: #8a4b00; background: #fff4e0; padding: .3em .5em; }
#filter { float: right; }
"""

SCRIPT = """
function dlbMachines(el) { return (el.getAttribute('data-machine') || '').split(' ').filter(Boolean); }
function dlbApplyFilter(machine) {
  var all = machine === '' || machine === 'all';
  document.querySelectorAll('[data-machine]').forEach(function (el) {
    var ms = dlbMachines(el);
    el.style.display = (all || ms.length === 0 || ms.indexOf(machine) >= 0) ? '' : 'none';
  });
  (window.DLB_CHARTS || []).forEach(function (c) {
    var gd = document.getElementById(c.id);
    var vis = c.machines.map(function (m) { return (all || m === '' || m === machine) ? true : false; });
    Plotly.restyle(gd, {visible: vis});
  });
  var sel = document.getElementById('machine-filter');
  if (sel) sel.value = all ? 'all' : machine;
}
function dlbInit() {
  (window.DLB_CHARTS || []).forEach(function (c) {
    Plotly.newPlot(c.id, c.figure.data, c.figure.layout, {responsive: true, displaylogo: false});
  });
  var sel = document.getElementById('machine-filter');
  if (sel) {
    sel.addEventListener('change', function () {
      history.replaceState(null, '', '#machine=' + encodeURIComponent(sel.value));
      dlbApplyFilter(sel.value);
    });
    var m = /machine=([^&]*)/.exec(location.hash);
    if (m) dlbApplyFilter(decodeURIComponent(m[1]));
  }
  var cf = document.getElementById('case-filter');
  if (cf) {
    cf.addEventListener('input', function () {
      var q = cf.value.toLowerCase(), n = 0;
      document.querySelectorAll('#cases li').forEach(function (li) {
        var show = li.getAttribute('data-name').toLowerCase().indexOf(q) >= 0;
        li.style.display = show ? '' : 'none'; if (show) n++;
      });
      document.getElementById('case-count').textContent = n;
    });
  }
  document.body.setAttribute('data-ready', '1');
}
document.addEventListener('DOMContentLoaded', dlbInit);
"""


def render(page: Page, nav: list[tuple[str, str]], machines: list[str], generated: str) -> str:
    links = "".join(f'<a href="{esc(_rel(page.path, p))}">{esc(t)}</a>' for p, t in nav)
    options = "".join(f'<option value="{esc(m)}">{esc(m)}</option>' for m in machines if m in page.machines)
    filt = (f'<label id="filter">Machine <select id="machine-filter"><option value="all">all</option>{options}'
            "</select></label>") if options else ""
    charts = [{"id": c.id, "machines": c.machines, "figure": _finite(json.loads(pio.to_json(c.figure, validate=False)))}
              for c in page.charts]
    data = json.dumps(charts, allow_nan=False, default=str).replace("</", "<\\/")
    div = lambda c: f'<div class="chart" id="{esc(c.id)}"></div>'  # noqa: E731
    placed = [b if isinstance(b, str) else div(b) for b in page.body]
    placed += [div(c) for c in page.charts if not any(c is b for b in page.body)]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(page.title)}</title>'
            f'<style>{STYLE}</style><script src="{_rel(page.path, "plotly.min.js")}"></script>'
            f'<script src="{_rel(page.path, "dashboard.js")}"></script></head><body>'
            f'<nav>{links}{filt}</nav><h1>{esc(page.title)}</h1>{"".join(placed)}'
            f'<p class="muted">Made by scripts/dashboard from {esc(generated)}.</p>'
            f"<script>window.DLB_CHARTS = {data};</script></body></html>")


def _finite(obj):
    """NaN and infinities as null (JSON has neither; plotly draws a gap)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def build(store: Store, out: Path, machine: str | None = None) -> dict:
    """Writes the site into `out`; returns its manifest (also site.json)."""
    data = Data(store, machine)
    if not data.runs:
        raise ValueError("the store has no runs" + (f" of machine {machine}" if machine else "") +
                         " (scripts/results ingest FILE, or run scripts/bench)")
    ops = {c.op for run in data.runs.values() for c in run.results.cases.values()}
    families = [f for f, (_, fops, _) in FAMILIES.items() if set(fops) & ops]
    covered = {o for f in families for o in FAMILIES[f][1]}
    families += sorted(ops - covered)
    counts = []
    for f in families:
        fops = FAMILIES[f][1] if f in FAMILIES else (f,)
        if f == "peers":
            n = len({c.name for r in data.runs.values() for c in r.results.cases.values()
                     if c.op in fops and c.is_peer})
            if n == 0:
                continue
        else:
            n = len({c.name for r in data.runs.values() for c in r.results.cases.values() if c.op in fops})
        counts.append((f, n))
    pages = [overview(data, counts)] + [family_page(f, data) for f, _ in counts] + history_pages(data)
    nav = [("index.html", "overview")] + [(f"{slug(f)}.html", FAMILIES[f][0] if f in FAMILIES else f)
                                          for f, _ in counts] + [("history/index.html", "history")]
    generated = describe(store.url)
    out.mkdir(parents=True, exist_ok=True)
    (out / "history").mkdir(exist_ok=True)
    (out / "plotly.min.js").write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")
    (out / "dashboard.js").write_text(SCRIPT, encoding="utf-8")
    manifest = {"machines": data.machines, "runs": len(data.runs), "pages": []}
    for page in pages:
        (out / page.path).write_text(render(page, nav, data.machines, generated), encoding="utf-8")
        manifest["pages"].append({"path": page.path, "title": page.title, "machines": sorted(page.machines),
                                  "charts": [{"id": c.id, "traces": c.trace_names(), "machines": c.machines}
                                             for c in page.charts]})
    (out / "site.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest
