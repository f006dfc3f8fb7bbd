"""A small MindSpore network for the O-level cross-check (tests_frameworks/test_mindspore_levels.py): one cell of
each kind the kit's MindSpore tables name — white-list cells (Conv2d, Dense), a white-list op inside a cell not on
the list (ReLU -> ops.ReLU), black-list cells (BatchNorm2d, BatchNorm1d, LayerNorm) and cells on neither list
(Flatten, Softmax). It lives in a file because ``auto_mixed_precision(net, "O1")`` rewrites the network from its
class's source (``inspect.getsource``), which a class typed into a notebook cell or ``python -`` lacks.
"""
from mindspore import nn

#: the layers in the order they run
LAYERS = ("conv", "bn2", "flat", "d1", "bn", "relu", "d2", "ln", "sm")


class SmallNet(nn.Cell):
    """(N, 1, 4, 4) -> conv -> bn2 -> flatten -> dense -> bn -> relu -> dense -> layernorm -> softmax -> (N, 3)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, pad_mode="same")
        self.bn2 = nn.BatchNorm2d(2)
        self.flat = nn.Flatten()
        self.d1 = nn.Dense(32, 8)
        self.bn = nn.BatchNorm1d(8)
        self.relu = nn.ReLU()
        self.d2 = nn.Dense(8, 3)
        self.ln = nn.LayerNorm((3,))
        self.sm = nn.Softmax()

    def construct(self, x):
        x = self.flat(self.bn2(self.conv(x)))
        return self.sm(self.ln(self.d2(self.relu(self.bn(self.d1(x))))))
