"""Figures a reader can trust: no panel without data, plain tick labels on short log axes, and
every shipped figure, redrawn from the committed results, readable."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from looped.report import bios, checks, runs, style  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "demo.json"


def test_a_panel_with_only_a_reference_line_counts_as_empty():
    """Notebook 05 once showed such a panel: an axvline at K=4 and nothing else."""
    fig, (a, b) = plt.subplots(1, 2)
    a.axvline(4)
    a.set_title("only a marker")
    b.plot([1, 2], [3, 4])
    assert checks.empty_panels(fig) == ["only a marker"]
    with pytest.raises(ValueError, match="only a marker"):
        style.show(fig)
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set_xlim(10, 20)  # data outside the view is no data either
    assert checks.empty_panels(fig) == ["panel 1"]
    plt.close("all")


def test_plain_tick_labels_on_a_short_log_axis():
    fig, ax = plt.subplots()
    ax.plot([2e12, 1.3e13], [0.6, 4.0])
    ax.set_xscale("log")
    ax.set_yscale("log")
    style.finish(fig)
    fig.canvas.draw()
    ys = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    xs = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    # 1, 2, 5 x 10^n gives two; 1, 2, 3, 5 leaves the bottom (0.6) a factor 1.7 below its lowest
    # label; the next set labels both ends within a factor 1.5
    assert ys == ["0.7", "1", "1.5", "2", "3", "4"], ys
    assert all("times" not in y and "^" not in y for y in ys)
    assert len(xs) >= 2 and all(x in {"2e12", "5e12", "1e13"} for x in xs), xs
    assert style.plain(0.5) == "0.5" and style.plain(2e12) == "2e12"
    plt.close(fig)


def test_runs_written_before_the_token_nll_rename_still_plot(tmp_path):
    """metrics.jsonl eval records said `nll` before they said `token_nll`; both load the same."""
    for name, key in (("old", "nll"), ("new", "token_nll")):
        run = tmp_path / name
        run.mkdir()
        (run / "config.yaml").write_text("schedule: fixed:4\nseed: 0\nbudget_frac: 1.0\n")
        train = {"kind": "train", "step": 1, "loss": 3.0, "depth": 4, "flops": 1e9}
        evals = {"kind": "eval", "step": 1, key: {"2": 2.5, "1": 3.5}}
        (run / "metrics.jsonl").write_text(json.dumps(train) + "\n" + json.dumps(evals) + "\n")
    old, new = runs.load_runs([tmp_path / "old", tmp_path / "new"])
    assert old["depths"] == new["depths"] == [1, 2]
    assert old["token_nll"] == new["token_nll"] == [3.5, 2.5]
    assert old["label"] == "fixed K=4"


def test_architecture_diagram_has_one_box_per_application_and_the_injections():
    """Fig. 6: P, K boxes of the same block A, H; an injection arc into loops 2..K."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    for depth in (1, 4):
        fig = runs.fig_architecture(depth)
        ax = fig.axes[0]
        boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
        texts = [t.get_text().split("\n")[0] for t in ax.texts]
        assert len(boxes) == depth + 2 and texts.count("A") == depth
        arcs = [p for p in ax.patches if isinstance(p, FancyArrowPatch) and p.get_linewidth() < 1]
        assert len(arcs) == depth - 1
        assert not checks.empty_panels(fig)


# -- readability: every shipped figure, and each check against a figure that breaks it --------
SHIPPED = sorted(p.name for p in (ROOT / "figures").glob("*.png"))


@pytest.fixture(scope="module")
def shipped_figures(tmp_path_factory):
    """Every figure of figures/, redrawn from the committed results/*.json by the functions that
    drew it (`render.figures`), as (name, problems found on the Figure as saved)."""
    from looped.report import render

    found = {}
    original = style.save

    def save(fig, path):
        style.finish(fig)  # the layout as saved
        found[path.name] = checks.readability_problems(fig) + checks.small_text(fig)
        return original(fig, path)

    style.save = save
    try:
        render.figures(ROOT, tmp_path_factory.mktemp("figures"))
    finally:
        style.save = original
    return found


@pytest.mark.slow
def test_the_figures_redrawn_from_results_are_the_shipped_ones(shipped_figures):
    assert sorted(shipped_figures) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.slow
def test_every_shipped_figure_is_readable(shipped_figures, name):
    """No legend over a plotted point or a tick label, at least three labelled ticks on every
    numeric axis, no tick labels over each other or cut, no series hidden under another, no
    float noise: checked on the matplotlib Figure in display coordinates."""
    assert shipped_figures[name] == [], f"{name}: " + "; ".join(shipped_figures[name])


def _line_panel(**legend):
    fig, ax = plt.subplots(figsize=(5, 3.5))
    x = np.linspace(0, 10, 50)
    ax.plot(x, 0.5 + 0 * x, label="flat at the bottom")
    ax.plot(x, x, label="rising")
    ax.legend(**legend)
    fig.tight_layout()
    fig.canvas.draw()
    return fig, ax


def test_a_legend_over_data_or_tick_labels_is_found_and_moved():
    fig, _ = _line_panel(loc="lower right")  # over the flat line
    assert any("covers" in p and "flat at the bottom" in p for p in checks.legend_problems(fig))
    style.finish(fig)
    assert checks.legend_problems(fig) == []
    fig, ax = _line_panel(loc="upper left", bbox_to_anchor=(-0.15, 0.6))  # over the y labels
    assert any("covers the text" in p for p in checks.legend_problems(fig))
    plt.close("all")


def test_too_few_ticks_overlapping_labels_and_float_noise_are_found():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [5.01, 5.02])
    ax.set_yticks([5.01, 5.02])
    ax.set_title("lr 0.0012000000000000001")
    fig.canvas.draw()
    assert any("y axis has 2 labelled ticks" in p for p in checks.tick_problems(fig))
    assert checks.noisy_numbers(fig) == ["float noise in 'lr 0.0012000000000000001'"]
    style.finish(fig)
    assert checks.tick_problems(fig) == []
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([1e11, 9e11], [0, 1])
    ax.set_xticks(np.linspace(1e11, 9e11, 9), [f"{v:.4e}" for v in np.linspace(1e11, 9e11, 9)])
    fig.canvas.draw()
    assert any("tick labels overlap" in p for p in checks.text_problems(fig))
    plt.close("all")


def test_a_series_under_another_is_hidden_unless_dashed_or_marked_apart():
    def panel(**top):
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([1, 2, 3, 4], [1, 2, 2, 3], "o-", label="below")
        ax.plot([1, 2, 3, 4], [1, 2, 2, 3], **{"marker": "o", "ls": "-", **top}, label="above")
        fig.canvas.draw()
        return checks.hidden_series(fig)

    assert panel() and "'below' is hidden under 'above'" in panel()[0]
    assert panel(ls="--") == []  # the line below shows through the gaps
    assert panel(marker="s") == []  # and its markers beside the others
    plt.close("all")


def test_the_checks_fail_on_the_figures_as_they_were_drawn(monkeypatch):
    """The figures that failed before the fixes, drawn as they were: Fig. 1's legend sat on
    uniform's curve in the 100% panel, the gradient-agreement legend on the K=8 vs K=16 line,
    and fixed-first's solid training curve covered fixed K=4's until the switch."""
    from looped.report import diagnose

    drawn = {}
    monkeypatch.setattr(style, "place_legends", lambda fig: False)  # legends where coded
    monkeypatch.setattr(style, "dashes", lambda label: {"ls": "-"})  # every curve solid
    monkeypatch.setattr(style, "save", lambda fig, path: drawn.setdefault(path.name, fig))
    demo = json.loads(REFERENCE.read_text())
    bios.fig1_recall(demo, Path("fig1.png"))
    bios.fig3_loss(demo, Path("fig3.png"))
    diagnose.fig_agreement(json.loads((ROOT / "results" / "diagnose.json").read_text()),
                           Path("agreement.png"))  # fmt: skip
    for fig in drawn.values():
        style.finish(fig)
    assert any("uniform 1..16" in p for p in checks.legend_problems(drawn["fig1.png"]))
    assert any("K=8 vs K=16" in p for p in checks.legend_problems(drawn["agreement.png"]))
    assert any("'fixed K=4' is hidden" in p for p in checks.hidden_series(drawn["fig3.png"]))
    plt.close("all")


def test_text_too_small_at_the_width_the_docs_show_a_figure_is_found():
    """A legend readable in a 9-inch figure becomes unreadable when four panels make the figure
    16 inches wide and the docs shrink it to 900 px."""
    for width, small in ((9.0, False), (16.0, True)):
        fig, ax = plt.subplots(figsize=(width, 3.5))
        ax.plot([0, 1, 2], [0, 1, 4], label="rising")
        ax.legend(fontsize=8)
        fig.canvas.draw()
        found = checks.small_text(fig)
        assert bool(found) is small and (not found or "px at 900 px wide" in found[0])
        plt.close(fig)


def test_coinciding_curves_a_flat_axis_and_an_empty_legend_entry_are_found():
    """Each new rule fails on a figure that breaks it and passes on its fixed twin."""
    x = np.arange(10.0)
    fig, ax = plt.subplots()
    ax.plot(x, x, label="a")
    ax.plot(x, x + 1e-4, "--", label="b")  # dashed, yet on top of "a" all the way
    ax.bar([1, 2], [0, 0], label="zero bits")  # a stacked series worth nothing
    ax.axvline(4, ls=":", label="training depth")  # a reference line is drawn: not flagged
    ax.legend()
    fig.canvas.draw()
    assert checks.coinciding_series(fig) == [
        "'panel 1': 'a' and 'b' coincide along 100% of their length"
    ]
    assert checks.empty_legend_entries(fig) == [
        "'panel 1': the legend names 'zero bits', which shows no data"
    ]
    ax.lines[1].set_ydata(x * 0.5)
    assert checks.coinciding_series(fig) == []
    plt.close(fig)

    fig, ax = plt.subplots()
    ax.plot(x, 6.1 + x * 1e-4)  # a 0.01% span: ticks 6.1, 6.1005, ...
    fig.canvas.draw()
    assert len(checks.below_noise(fig)) == 1
    ax.set_ylim(5.5, 6.5)
    assert checks.below_noise(fig) == []
    checks.claim_noise(ax, 2.0)  # a stated noise wider than the span fails it again
    assert len(checks.below_noise(fig)) == 1
    plt.close(fig)


def test_a_plain_demo_without_the_depth_runs_draws_every_figure(tmp_path):
    """`make demo` runs no fixed K=1, 2, 8 (that is `--full`): no figure may then be refused
    for an empty panel (the two-hop figure once drew an empty one for them)."""
    result = json.loads(REFERENCE.read_text())
    result["runs"] = [r for r in result["runs"] if r["group"] != "depth"]
    paths = bios.figures(result, tmp_path)
    assert (tmp_path / "two_hop_recall.png") in paths
