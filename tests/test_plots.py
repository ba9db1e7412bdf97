"""Figures a reader can trust: no panel without data, plain tick labels on short log axes, and
the demo figures drawn from the committed reference results/demo.json."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from looped import plots  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "demo.json"


def test_a_panel_with_only_a_reference_line_counts_as_empty():
    """Notebook 05 once showed such a panel: an axvline at K=4 and nothing else."""
    fig, (a, b) = plt.subplots(1, 2)
    a.axvline(4)
    a.set_title("only a marker")
    b.plot([1, 2], [3, 4])
    assert plots.empty_panels(fig) == ["only a marker"]
    with pytest.raises(ValueError, match="only a marker"):
        plots.show(fig)
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set_xlim(10, 20)  # data outside the view is no data either
    assert plots.empty_panels(fig) == ["panel 1"]
    plt.close("all")


def test_plain_tick_labels_on_a_short_log_axis():
    fig, ax = plt.subplots()
    ax.plot([2e12, 1.3e13], [0.6, 4.0])
    ax.set_xscale("log")
    ax.set_yscale("log")
    plots._finish(fig)
    fig.canvas.draw()
    ys = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    xs = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ys == ["1", "2"] or set(ys) <= {"0.6", "1", "2", "4"}, ys
    assert len(ys) >= 2 and all("times" not in y and "^" not in y for y in ys)
    assert len(xs) >= 2 and all(x in {"2e12", "5e12", "1e13"} for x in xs), xs
    assert plots._plain(0.5) == "0.5" and plots._plain(2e12) == "2e12"
    plt.close(fig)


@pytest.mark.skipif(not REFERENCE.is_file(), reason="no committed results/demo.json")
def test_every_demo_figure_of_the_reference_has_data_in_every_panel(tmp_path, monkeypatch):
    """The figures the README and notebook 05 show, redrawn from the committed results (which
    hold catch-up runs beyond the full budget): `_save` refuses an empty panel, and the titles
    fit inside the figure."""
    result = json.loads(REFERENCE.read_text())
    checked = []

    def save(fig, path):
        plots._finish(fig)  # the layout as saved
        fig.canvas.draw()
        box = fig.get_window_extent()
        for ax in fig.axes:
            for text in (ax.title, ax.xaxis.label, ax.yaxis.label, *fig.texts):
                if text.get_text():
                    e = text.get_window_extent()
                    inside = box.x0 - 1 <= e.x0 and e.x1 <= box.x1 + 1
                    assert inside and box.y0 - 1 <= e.y0 and e.y1 <= box.y1 + 1, (
                        f"{path.name}: {text.get_text()!r} is cut"
                    )
        checked.append(path.name)
        return original(fig, path)

    original = plots._save
    monkeypatch.setattr(plots, "_save", save)
    paths = plots.demo_figures(result, tmp_path)
    assert {p.name for p in paths} == set(checked) >= {
        "fig1_recall_bits.png", "fig2_nll_vs_flops.png", "fig3_loss_trajectory.png",
        "fig5_depth_specialisation.png", "fig7_schedules.png", "fig8_nll_by_depth.png",
        "finishing_phase.png", "two_hop_recall.png",
    }  # fmt: skip


def test_runs_written_before_the_token_nll_rename_still_plot(tmp_path):
    """metrics.jsonl eval records said `nll` before they said `token_nll`; both load the same."""
    for name, key in (("old", "nll"), ("new", "token_nll")):
        run = tmp_path / name
        run.mkdir()
        (run / "config.yaml").write_text("schedule: fixed:4\nseed: 0\nbudget_frac: 1.0\n")
        train = {"kind": "train", "step": 1, "loss": 3.0, "depth": 4, "flops": 1e9}
        evals = {"kind": "eval", "step": 1, key: {"2": 2.5, "1": 3.5}}
        (run / "metrics.jsonl").write_text(json.dumps(train) + "\n" + json.dumps(evals) + "\n")
    old, new = plots.load_runs([tmp_path / "old", tmp_path / "new"])
    assert old["depths"] == new["depths"] == [1, 2]
    assert old["token_nll"] == new["token_nll"] == [3.5, 2.5]
    assert old["label"] == "fixed K=4"


def test_architecture_diagram_has_one_box_per_application_and_the_injections():
    """Fig. 6: P, K boxes of the same block A, H; an injection arc into loops 2..K."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from looped import plots

    for depth in (1, 4):
        fig = plots.fig_architecture(depth)
        ax = fig.axes[0]
        boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
        texts = [t.get_text().split("\n")[0] for t in ax.texts]
        assert len(boxes) == depth + 2 and texts.count("A") == depth
        arcs = [p for p in ax.patches if isinstance(p, FancyArrowPatch) and p.get_linewidth() < 1]
        assert len(arcs) == depth - 1
        assert not plots.empty_panels(fig)
