"""Figures of training runs: a measure against passes and against seconds, and the (TPR, TNR) plane.

One picture serves ``calopt compare`` (one line per method) and ``calopt train --plot``
(the run's training and test values). The third panel draws the measure's level curves
over the plane of true positive and true negative rates, with each method's operating
point on it: where a method lands, and what the measure trades for what (a picture that
shows why G-mean and F1 prefer different classifiers).

matplotlib is an optional extra (``pip install 'calopt[plot]'``) and this is the only
module that imports it, lazily, through its object-oriented API (``Figure``, no
``pyplot``): no global state is touched and no window opens. Files are written
atomically, PNG or SVG by the file's suffix.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from calopt import registry
from calopt.backends import get_backend, to_numpy
from calopt.errors import CaloptError, ParameterError
from calopt.io.labels import encode_like
from calopt.models.archive import atomic_write
from calopt.models.linear import LinearModel

__all__ = ["FORMATS", "PlotUnavailable", "Series", "check_plot_path", "comparison_figure", "figure",
           "history_figure", "save_figure"]

#: File suffixes and the format matplotlib writes for each.
FORMATS = {".png": "png", ".svg": "svg"}
#: Figure size (inches) and resolution of the PNG: 1760 × 616 pixels for three panels.
PANEL_WIDTH, HEIGHT, DPI = 5.6, 5.6, 110
#: A time or pass axis is logarithmic when its largest value is more than this times its smallest.
LOG_SCALE_RATIO = 20


class PlotUnavailable(CaloptError, ImportError):
    """matplotlib is not installed (the ``plot`` extra)."""


@dataclasses.dataclass
class Series:
    """One line of the figure: values by pass and by seconds, and an operating point (TPR, TNR).

    A series with one point (a method scored only once) is drawn as a marker.
    """

    label: str
    passes: list[float]
    seconds: list[float]
    values: list[float]
    tpr: float | None = None
    tnr: float | None = None


def check_plot_path(path: str | os.PathLike) -> str:
    """The format of a figure file by its suffix, once matplotlib is known to be there.

    Called before any work, so a bad request fails in a second: an unknown suffix is a
    ParameterError, a missing matplotlib a :class:`PlotUnavailable`, each one line.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ParameterError(f"--plot {path}: the figure's file name must end in "
                             f"{' or '.join(FORMATS)} (it picks the format)")
    _figure_class()
    return FORMATS[suffix]


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotUnavailable("drawing a figure needs matplotlib: pip install 'calopt[plot]'") from None
    return Figure


def save_figure(fig: Any, path: str | os.PathLike) -> None:
    """Write ``fig`` to ``path`` atomically, PNG or SVG by the suffix."""
    fmt = check_plot_path(path)
    atomic_write(path, lambda handle: fig.savefig(handle, format=fmt, dpi=DPI))


def figure(series: list[Series], *, title: str, value_label: str, measure: Any = None,
           measure_label: str | None = None, positive_rate: float | None = None) -> Any:
    """The figure: ``value_label`` by passes and by seconds (on log scales when the values span
    more than :data:`LOG_SCALE_RATIO`), and, when ``measure`` is given, the (TPR, TNR)
    plane around the series' operating points with the measure's level curves (at
    ``positive_rate`` for the measures whose value depends on it)."""
    from matplotlib.ticker import FormatStrFormatter, MaxNLocator, NullFormatter

    Figure = _figure_class()
    panels = 3 if measure is not None else 2
    fig = Figure(figsize=(PANEL_WIDTH * panels, HEIGHT), layout="constrained")
    axes = fig.subplots(1, panels)
    by_passes, by_seconds = axes[0], axes[1]
    styles = _styles(series)
    for line, style in zip(series, styles):
        drawn = dict(color=style["color"], marker=style["marker"], label=line.label)
        if len(line.values) == 1:
            drawn.update(markersize=13, linestyle="none", markeredgecolor="black", markeredgewidth=0.5)
        else:
            drawn.update(markersize=4, linewidth=1.6)
        by_passes.plot(line.passes, line.values, **drawn)
        by_seconds.plot(line.seconds, line.values, **drawn)
    for ax, key, what, unit in ((by_passes, "passes", "passes", ("passes over the training data", "")),
                                (by_seconds, "seconds", "fit time", ("fit time", "seconds"))):
        name, notes = unit[0], [unit[1]] if unit[1] else []
        spread = [x for line in series for x in getattr(line, key) if x > 0]
        if spread and max(spread) > LOG_SCALE_RATIO * min(spread):  # budgets orders of magnitude apart
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))  # 1, 10, 100 rather than 10⁰, 10¹, 10²
            ax.xaxis.set_minor_formatter(NullFormatter())
            notes.append("log scale")
        elif key == "passes":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        else:  # fit times of a few milliseconds have long labels ("0.00425"): fewer of them
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.set(title=f"{value_label} by {what}", xlabel=name + (f" ({', '.join(notes)})" if notes else ""),
               ylabel=value_label)
        ax.grid(True, which="major", alpha=0.3)
    if measure is not None:
        _plane(axes[2], series, styles, measure, measure_label, positive_rate)
    handles, labels = by_passes.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(series), 2), frameon=False)
    fig.suptitle(title, fontsize=12)
    return fig


def _plane(ax: Any, series: list[Series], styles: list[dict[str, Any]], measure: Any, label: str | None,
           positive_rate: float | None) -> None:
    """The measure's level curves and each series' operating point, in a square window of the
    (TPR, TNR) plane around the points (the whole plane when they spread over it)."""
    from matplotlib.ticker import MaxNLocator

    measure = registry.get_measure(measure)
    points = [(line.tpr, line.tnr) for line in series if line.tpr is not None and line.tnr is not None]
    (x0, x1), (y0, y1) = _window(points)
    p = 0.5 if positive_rate is None or not 0.0 < positive_rate < 1.0 else positive_rate
    tpr, tnr = np.meshgrid(np.linspace(x0, x1, 241), np.linspace(y0, y1, 241))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.asarray(measure.from_rates(tpr, tnr, p, xp=get_backend("numpy").xp), dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size and finite.max() > finite.min():
        levels = MaxNLocator(nbins=9, steps=[1, 2, 5, 10]).tick_values(finite.min(), finite.max())
        levels = levels[(levels > finite.min()) & (levels < finite.max())]
        step = levels[1] - levels[0] if levels.size > 1 else 0.1
        contours = ax.contour(tpr, tnr, values, levels=levels, colors="0.6", linewidths=0.8)
        ax.clabel(contours, fmt=f"%.{max(1, int(-np.floor(np.log10(step) + 1e-9)))}f", fontsize=8)
    for line, style in zip(series, styles):
        if line.tpr is not None and line.tnr is not None:
            ax.plot([line.tpr], [line.tnr], marker=style["marker"], markersize=13 if len(line.values) == 1 else 10,
                    color=style["color"], markeredgecolor="black", markeredgewidth=0.6, linestyle="none", alpha=0.9)
    skew = "" if measure.family == "concave" else f" at {p:.1%} positives"
    ax.set(title=f"Operating points\nlevel curves of {label or measure.spec}{skew}",
           xlabel="TPR (true positive rate)", ylabel="TNR (true negative rate)", xlim=(x0, x1), ylim=(y0, y1),
           aspect="equal")
    ax.grid(True, alpha=0.2)


def _window(points: list[tuple[float, float]], least: float = 0.3, margin: float = 0.06) -> tuple:
    """A square ((x0, x1), (y0, y1)) inside [0, 1]² holding ``points`` with a margin, at least ``least`` wide."""
    if not points:
        return (0.0, 1.0), (0.0, 1.0)
    xs, ys = np.asarray(points, dtype=np.float64).T
    span = min(1.0, max(least, xs.max() - xs.min() + 2 * margin, ys.max() - ys.min() + 2 * margin))
    corners = []
    for low, high in ((xs.min(), xs.max()), (ys.min(), ys.max())):
        start = (low + high - span) / 2
        start = min(max(start, 0.0), 1.0 - span)
        corners.append((start, start + span))
    return tuple(corners)


def _styles(series: list[Series]) -> list[dict[str, Any]]:
    """A colour and a marker per series (a star for a series of one point), the same in every panel."""
    from matplotlib import rcParams

    cycle = rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    markers = ("o", "s", "D", "^", "v", "P", "X")
    return [{"color": cycle[i % len(cycle)], "marker": "*" if len(line.values) == 1 else markers[i % len(markers)]}
            for i, line in enumerate(series)]


def comparison_figure(comparison: Any, *, data: str, test: str) -> Any:
    """The figure of a :class:`calopt.reporting.comparison.Comparison`, trained on ``data`` and tested on ``test`` (names)."""
    series = [Series(run.description or run.method, *([row[key] for row in run.curve]
                                                       for key in ("passes", "seconds", "value")), run.tpr, run.tnr)
              for run in comparison.runs]
    title = (f"calopt compare: {comparison.measure}, trained on {data} ({comparison.n_train:,} rows), tested on "
             f"{test} ({comparison.n_test:,} rows, {comparison.test_positive_rate:.1%} positive)")
    return figure(series, title=title, value_label=f"test {comparison.measure}", measure=comparison.measure,
                  measure_label=comparison.measure, positive_rate=comparison.test_positive_rate)


def history_figure(model: Any, data: list[tuple[str, Any, Any]]) -> Any:
    """The figure of one trained model: its history's values by pass and by seconds on the
    training data and the test data, and, for a binary model, their operating points in the
    (TPR, TNR) plane (level curves at the last data's positive rate).

    ``data`` is ``[(name, X, y)]``, the training data first, then the test data if any
    (the model's history has their values at each epoch).
    """
    history = model.history
    loop = [row["seconds"] for row in history]
    fixed = model.fit_seconds - (loop[-1] if loop else 0.0)  # scaling, step trial, final threshold
    passes = [float(row["epoch"]) for row in history]
    seconds = [fixed + s for s in loop]
    binary = isinstance(model, LinearModel)
    series = []
    for key, (name, X, y) in zip(("train", "test"), data):
        if history and key in history[0]:
            summary = model.summary(X, y) if binary else {}
            series.append(Series(f"{name} ({'training' if key == 'train' else 'test'} data)", passes, seconds,
                                 [row[key] for row in history], summary.get("tpr"), summary.get("tnr")))
    if binary:
        value_label = model.measure
        positive_rate = float(np.mean(encode_like(to_numpy(data[-1][2]), model.classes) > 0))
    else:
        positive_rate = None
        value_label = (f"macro {model.measure} (one-vs-rest)" if model.fit_report.one_vs_rest == "per class"
                       else "top-1 accuracy")
    title = (f"calopt train: {model.describe()} on {data[0][0]} ({model.fit_report.backend}, "
             f"fit in {model.fit_seconds:.2f} s)")
    return figure(series, title=title, value_label=value_label, measure=model.measure if binary else None,
                  positive_rate=positive_rate)
