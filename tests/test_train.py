"""Tests for ampkit.train: train_step (no host sync, its hooks, a plain module), train/History, scalers and skips,
callbacks, run_level and its cache; and the live loss plot that plugs into train (ampkit.widgets.loss_plot)."""
import json
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ampkit.data import make_data
from ampkit.lessons.autocast_and_levels import LevelRunCache, run_level
from ampkit.models import build_model
from ampkit.precision import apply_level
from ampkit.train import History, Progress, evaluate, make_optimizer, train, train_step
from ampkit.widgets.loss_plot import LiveLossPlot

ROOT = Path(__file__).resolve().parents[1]


def test_train_step_does_not_sync(monkeypatch):
    """No .item() in train_step itself; with torch's GradScaler only its own one sync per step remains."""
    X, y = make_data("mlp", 16)
    calls = []
    real_item = torch.Tensor.item

    def counting_item(self):
        calls.append(1)
        return real_item(self)

    for level in ("O0", "O1", "O2", "O3"):
        m = build_model("mlp")
        mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), level, "fp16")
        monkeypatch.setattr(torch.Tensor, "item", counting_item)
        loss = train_step(mp, X, y, F.cross_entropy)
        monkeypatch.undo()
        assert calls == [] and loss.dtype == torch.float32 and not loss.requires_grad and loss.shape == ()
    m = build_model("mlp")
    mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O2", "fp16")
    monkeypatch.setattr(torch.Tensor, "item", counting_item)
    train_step(mp, X, y, F.cross_entropy, torch.amp.GradScaler("cpu"))
    monkeypatch.undo()
    assert len(calls) == 1  # GradScaler.step's own check of found_inf


def test_train_records_every_step():
    h = train(build_model("mlp"), make_data("mlp", 256), "O1", "bf16", steps=12, batch_size=32,
              eval_data=make_data("mlp", 128, seed=1))
    assert isinstance(h, History) and h.steps == 12 and len(h.times) == 12
    assert h.scales == [None] * 12 and h.skipped == [False] * 12 and h.n_skipped == 0
    assert all(t > 0 for t in h.times) and h.step_time() > 0
    assert h.losses[-1] < h.losses[0] and 0 <= h.accuracy <= 1
    assert h.level == "O1" and h.dtype == "bfloat16" and not h.diverged
    assert h.final_loss(3) == pytest.approx(sum(h.losses[-3:]) / 3)


def test_train_is_deterministic():
    a = train(build_model("transformer"), make_data("transformer", 128), "O2", "bf16", steps=5, optimizer="adam",
              lr=1e-3)
    b = train(build_model("transformer"), make_data("transformer", 128), "O2", "bf16", steps=5, optimizer="adam",
              lr=1e-3)
    assert a.losses == b.losses


def test_train_with_torch_scaler_records_scale_and_skips():
    X, y = make_data("mlp", 256)
    sc = torch.amp.GradScaler("cpu", init_scale=2.0**24, growth_interval=1000)
    h = train(build_model("mlp"), (X, y), "O2", "fp16", scaler=sc, steps=20)
    assert h.scales[0] == 2.0**24
    assert h.skipped[0] and h.scales[1] == 2.0**23  # fp16 overflow at 2^24 -> backoff
    first_ok = h.skipped.index(False)
    assert all(h.skipped[:first_ok]) and not any(h.skipped[first_ok:])
    assert h.scales[first_ok] == 2.0 ** (24 - first_ok)
    assert h.n_skipped == first_ok > 0


class RecordingScaler:
    """A minimal scaler with GradScaler's calls and ampkit's last_step_skipped (skips every other step)."""

    def __init__(self):
        self.n = 0
        self.last_step_skipped = False

    def scale(self, loss):
        return loss * 2.0

    def unscale_(self, opt):
        pass

    def step(self, opt):
        self.n += 1
        for g in opt.param_groups:
            for p in g["params"]:
                p.grad.div_(2.0)
        if self.n % 2:
            opt.step()

    def update(self):
        self.last_step_skipped = self.n % 2 == 0

    def get_scale(self):
        return 2.0


def test_train_uses_last_step_skipped_when_the_scaler_has_it():
    h = train(build_model("mlp"), make_data("mlp", 256), "O1", "fp16", scaler=RecordingScaler(), steps=6)
    assert h.skipped == [False, True] * 3 and h.scales == [2.0] * 6


def test_train_accepts_a_mixed_precision_and_an_iterable():
    m = build_model("mlp")
    mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O3", "bf16")
    X, y = make_data("mlp", 64)
    data = [(X[:32], y[:32]), (X[32:], y[32:])]
    h = train(mp, data, steps=10)
    assert h.steps == 2 and h.level == "O3"  # the iterable ran out
    seen = []
    train(build_model("mlp"), (X, y), steps=3, callback=lambda s, hist: seen.append((s, hist.steps)))
    assert seen == [(0, 1), (1, 2), (2, 3)]


def test_progress_and_live_plot_run_headless():
    plot = LiveLossPlot(every=2)
    h = train(build_model("mlp"), make_data("mlp", 128), "O3", "bf16", steps=5, progress=True, callback=plot)
    assert h.steps == 5
    # sent at steps 0, 2, 4 (only the new points each time); on_train_end finds the last step already sent
    assert [(m["start"], len(m["losses"].split())) for m in plot.sent] == [(0, 1), (1, 2), (3, 2)]
    assert plot.points == h.losses and plot.title == "O3 bf16: training loss, live"
    assert plot.losses.split() == [repr(v) for v in h.losses] and plot.bad == -1   # the whole curve: saved state
    assert plot.dtype_key == "bf16"  # the run's dtype colour (look.colours.dtype on the page), named on the update
    plot = LiveLossPlot(reference=[1.0, 0.5])
    assert plot.reference == "1.0 0.5"
    plot.update(h)
    assert plot.points == h.losses and plot.sent[-1]["start"] == 0


def test_live_plot_draws_the_last_step_when_every_skips_it():
    plot = LiveLossPlot(every=3)
    drawn = []
    real = plot.update
    plot.update = lambda hist: (drawn.append(hist.steps), real(hist))
    train(build_model("mlp"), make_data("mlp", 128), steps=5, callback=plot)
    assert drawn == [1, 4, 5]  # steps 0 and 3, then the end of the run
    assert plot.title == "O0: training loss, live" and plot.dtype_key == "fp32"
    assert len(plot.losses.split()) == 5
    with pytest.raises(ValueError, match="every"):
        LiveLossPlot(every=0)


def test_callback_contract():
    calls = []

    class Recorder:
        def __call__(self, step, hist):
            calls.append(("step", step, hist.steps))

        def on_train_end(self, hist):
            calls.append(("end", hist.steps))

    train(build_model("mlp"), make_data("mlp", 64), steps=3, callback=Recorder())
    assert calls == [("step", 0, 1), ("step", 1, 2), ("step", 2, 3), ("end", 3)]
    with pytest.raises(TypeError, match="callback"):
        train(build_model("mlp"), make_data("mlp", 64), steps=1, callback=5)


def test_live_plot_streams_points_and_marks_nan():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    plot = LiveLossPlot("O3 fp16")
    h = History("O3", "float16", losses=[1.2, 1.1, float("nan"), float("nan")])
    plot.update(h)
    assert plot.sent[-1] == {"type": "points", "start": 0, "losses": "1.2 1.1 nan nan", "bad": 2}
    h.losses.append(float("inf"))
    plot.update(h)   # only the new point goes out
    assert plot.sent[-1] == {"type": "points", "start": 4, "losses": "inf", "bad": 2}
    plot.on_train_end(h)
    assert plot.bad == 2 and plot.losses == "1.2 1.1 nan nan inf" and plot.title == "O3 fp16"
    fig = plot.figure()   # the still picture: mark_nonfinite's mark, a readable Agg figure
    ax = fig.axes[0]
    assert isinstance(fig.canvas, FigureCanvasAgg) and fig.get_size_inches()[0] >= 6.5
    assert "step" in ax.get_xlabel() and "nats" in ax.get_ylabel() and ax.get_title() == "O3 fp16"
    assert [t.get_text() for t in ax.texts] == ["inf/NaN from step 2"]
    assert plot.still()[:4] == b"\x89PNG"
    plot.update(History("O1", "bfloat16", losses=[1.0, 0.9]))   # another run: the page starts over
    assert plot.sent[-1] == {"type": "points", "start": 0, "losses": "1.0 0.9", "bad": None}


def test_live_plot_bytes_per_update():
    import json

    plot = LiveLossPlot(every=1)
    train(build_model("mlp"), make_data("mlp", 128), "O1", "bf16", steps=40, callback=plot)
    sizes = [len(json.dumps(m)) for m in plot.sent]
    assert len(sizes) == 40 and max(sizes) < 120   # one point a message, whatever the run's length


def test_live_plot_updates_one_display_in_a_notebook(monkeypatch):
    shown = []

    class Handle:
        def update(self, obj, raw=False):
            shown.append(("update", sorted(obj)))

    import ampkit.widgets.loss_plot as wt

    monkeypatch.setattr(wt, "get_ipython", lambda: object())
    monkeypatch.setattr(wt, "display", lambda obj, raw=False, display_id=None: shown.append(("display", sorted(obj)))
                        or Handle())
    plot = LiveLossPlot("O1 bf16")
    plot.update(History("O1", "bfloat16", losses=[1.0, 0.9]))
    plot.on_train_end(History("O1", "bfloat16", losses=[1.0, 0.9]))
    bundle = ["application/vnd.jupyter.widget-view+json", "image/png", "text/plain"]
    assert shown == [("display", bundle), ("update", bundle)]  # the view and its still, redrawn once at the end


def test_evaluate_restores_training_mode():
    m = build_model("cnn_bn")
    mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O2", "bf16")
    X, y = make_data("cnn_bn", 8)
    acc = evaluate(mp, X, y)
    assert 0 <= acc <= 1 and m.training


def test_run_level_and_cache():
    r = run_level("mlp", "O2", "bf16", steps=4)
    assert r.level == "O2" and r.dtype == "bfloat16" and r.history.steps == 4 and r.label == "O2 bf16"
    assert run_level("mlp", "O0", "bf16", steps=1).label == "O0"  # O0 runs in fp32: no dtype in its name
    assert r.memory.masters == r.memory.weights * 2 and r.step_time > 0
    assert [t.name for t in r.trace][:2] == ["(model)", "net.0"]
    cache = LevelRunCache(steps=3)
    assert not cache.has("mlp", "O3", "fp16")
    calls = []
    a = cache.get("mlp", "O3", "fp16", callback=lambda s, h: calls.append(s))
    assert calls == [0, 1, 2] and len(cache) == 1
    assert cache.get("mlp", "o3", torch.float16) is a and cache.has("mlp", "O3", "float16")
    with pytest.raises(ValueError, match="O0, O1, O2, O3"):
        cache.get("mlp", "O5", "bf16")


def test_bad_input():
    with pytest.raises(ValueError, match="sgd, adam, adamw"):
        make_optimizer("lamb", build_model("mlp").parameters(), 0.1)
    with pytest.raises(ValueError, match="lr"):
        make_optimizer("sgd", build_model("mlp").parameters(), -1)
    with pytest.raises(TypeError, match="Optimizer"):
        make_optimizer(lambda p: None, build_model("mlp").parameters(), 0.1)
    with pytest.raises(ValueError, match="steps"):
        train(build_model("mlp"), make_data("mlp", 8), steps=0)
    with pytest.raises(TypeError, match="data must be"):
        train(build_model("mlp"), 5, steps=1)
    with pytest.raises(TypeError, match="MixedPrecision"):
        train("mlp", make_data("mlp", 8), steps=1)


def test_train_step_serves_a_plain_module_like_o0():
    X, y = make_data("mlp", 32)
    a, b = build_model("mlp", seed=3), build_model("mlp", seed=3)
    mp = apply_level(a, torch.optim.SGD(a.parameters(), lr=0.1), "O0")
    opt = torch.optim.SGD(b.parameters(), lr=0.1)
    for _ in range(3):
        la = train_step(mp, X, y, F.cross_entropy)
        lb = train_step(b, X, y, F.cross_entropy, optimizer=opt)
        assert torch.equal(la, lb)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not hasattr(b, "_ampkit_precision_level")  # a plain step applies no level: b can still get one later
    apply_level(b, torch.optim.SGD(b.parameters(), lr=0.1), "O2", "bf16")


def test_train_step_forward_loss_and_after_backward_hooks():
    X, y = make_data("mlp", 32)
    a, b = build_model("mlp", seed=4), build_model("mlp", seed=4)
    mpa = apply_level(a, torch.optim.SGD(a.parameters(), lr=0.1), "O2", "bf16")
    mpb = apply_level(b, torch.optim.SGD(b.parameters(), lr=0.1), "O2", "bf16")
    seen = []

    def after_backward(mp):  # grads exist (fp32 masters under O2) and the optimizer has not stepped yet
        seen.append((mp.level, all(m.grad is not None and m.grad.dtype == torch.float32 for m in mp.masters),
                     torch.equal(mp.masters[0], mpb.masters[0])))

    la = train_step(mpa, X, y, F.cross_entropy, after_backward=after_backward)
    lb = train_step(mpb, X, y, None, forward_loss=lambda x, t: F.cross_entropy(mpb.forward(x), t))
    assert seen == [("O2", True, True)] and torch.equal(la, lb)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_train_step_bad_input():
    X, y = make_data("mlp", 8)
    m = build_model("mlp")
    with pytest.raises(TypeError, match="optimizer="):
        train_step(m, X, y, F.cross_entropy)
    with pytest.raises(TypeError, match="MixedPrecision"):
        train_step("mlp", X, y, F.cross_entropy)
    mp = apply_level(m, torch.optim.SGD(m.parameters(), lr=0.1), "O1")
    with pytest.raises(ValueError, match="own mp.optimizer"):
        train_step(mp, X, y, F.cross_entropy, optimizer=torch.optim.SGD(build_model("mlp").parameters(), lr=0.1))


def test_wrong_type_is_type_error_wrong_value_is_value_error():
    with pytest.raises(TypeError, match="steps"):
        train(build_model("mlp"), make_data("mlp", 8), steps=2.0)
    with pytest.raises(TypeError, match="lr"):
        make_optimizer("sgd", build_model("mlp").parameters(), "0.1")
    with pytest.raises(ValueError, match="num_threads"):
        run_level("mlp", "O0", steps=1, num_threads=0)
    with pytest.raises(TypeError, match="num_threads"):
        run_level("mlp", "O0", steps=1, num_threads=1.5)


def test_run_level_refuses_the_language_model_with_a_clear_error():
    from ampkit.lessons.autocast_and_levels import CLASSIFIERS, run_level

    assert "mlp" in CLASSIFIERS and "decoder" not in CLASSIFIERS
    with pytest.raises(ValueError, match=r"classifier models .*'decoder'.*lm_loss"):
        run_level("decoder", "O1", "bf16", steps=1)


def test_progress_in_a_notebook_leaves_the_finished_line(monkeypatch):
    """In a kernel the bar is one display, redrawn in place: what stays behind (and is saved) is the last state."""
    import IPython.display

    shown = []

    class Handle:
        def update(self, obj, raw=False):
            shown.append(obj["text/plain"])

    def fake_display(obj, raw=False, display_id=False):
        assert raw and display_id
        shown.append(obj["text/plain"])
        return Handle()

    monkeypatch.setattr(IPython.display, "display", fake_display)
    bar = Progress(30, "O2 fp16", notebook=True, mininterval=3600)   # no redraw before the end
    for _ in range(30):
        bar.update("loss=0.25")
    bar.close()
    assert shown[0].startswith("O2 fp16:   0%") and "0/30 [" in shown[0]
    assert len(shown) == 2 and "30/30 [" in shown[-1] and "100%" in shown[-1] and "loss=0.25" in shown[-1]
    with pytest.raises(TypeError, match="total"):
        Progress(1.5, notebook=False)


_METER = re.compile(r"(\d+)/(\d+) \[")   # tqdm's meter: "O2 fp16:   0%|          | 0/30 [00:00<?, ?it/s]"


@pytest.mark.parametrize("path", sorted(ROOT.glob("notebooks/**/*.ipynb")), ids=lambda p: str(p.relative_to(ROOT)))
def test_stored_notebooks_show_no_stale_progress_bar(path):
    """A reader without a kernel (GitHub, nbviewer, an HTML export) sees a finished bar or none: no "0/30"."""
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = "".join(out.get("text", "")) + "".join(data.get("text/plain", ""))
            for done, total in _METER.findall(text):
                assert done == total, f"{path.name}: a progress bar stored unfinished ({done}/{total})"
            if "application/vnd.jupyter.widget-view+json" in data:
                assert not _METER.search(text), f"{path.name}: a progress widget (its stored text is its first state)"
