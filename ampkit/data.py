"""Seeded synthetic data sets, generated in code (no downloads), each learnable in seconds on a CPU.

Used with :mod:`ampkit.models` from ``02_autocast_and_levels.ipynb`` on.

- :func:`make_blobs`: Gaussian clusters in ``n_features`` dimensions (for :class:`~ampkit.models.MLP`).
- :func:`make_images`: 1x32x32 images, one smooth template per class plus noise (for ``SimpleCNN``).
- :func:`make_sequences`: token sequences whose label is the token planted most often (for ``TinyTransformer``).
- :func:`make_data`: the data set that matches a :func:`~ampkit.models.build_model` name.
- :func:`batches`: a seeded mini-batch iterator.
- :func:`make_corpus`, :class:`CharVocab`, :func:`char_windows`, :func:`char_batches`: a character corpus from a
  small grammar and its next-character windows, for :class:`~ampkit.models.DecoderLM`. Taught in notebook 07
  (``07_transformers_in_16_bits.ipynb``).

>>> X, y = make_blobs(n_samples=8, n_features=3, n_classes=2, seed=0)
>>> X.shape, y.shape, X.dtype, y.dtype
(torch.Size([8, 3]), torch.Size([8]), torch.float32, torch.int64)
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from ampkit._util import check_int, check_number, check_positive_finite
from ampkit.models import MODEL_NAMES

__all__ = ["make_blobs", "make_images", "make_sequences", "make_data", "batches", "CHARS", "CharVocab", "CHAR_VOCAB",
           "make_corpus", "char_windows", "make_char_windows", "char_batches"]


def _gen(seed: int, name: str = "seed") -> torch.Generator:
    return torch.Generator().manual_seed(check_int(name, seed, minimum=None))


def make_blobs(n_samples: int = 2048, n_features: int = 16, n_classes: int = 4, spread: float = 1.0,
               seed: int = 0, task_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters: class ``c`` is centred on a random point at distance 3 from the origin, with
    standard deviation ``spread``. Returns ``X`` (float32, ``(n, n_features)``) and ``y`` (int64 labels).

    ``task_seed`` draws the centres (the task), ``seed`` the samples: a held-out set is the same task with
    another ``seed``.

    >>> X, y = make_blobs(100, seed=1); int(y.max()) < 4
    True
    """
    n_samples = check_int("n_samples", n_samples)
    n_features = check_int("n_features", n_features)
    n_classes = check_int("n_classes", n_classes, 2)
    spread = check_positive_finite("spread", spread, example="1.0")
    g = _gen(seed)
    centres = torch.randn(n_classes, n_features, generator=_gen(task_seed, "task_seed"))
    centres = 3.0 * centres / centres.norm(dim=1, keepdim=True)
    y = torch.randint(0, n_classes, (n_samples,), generator=g)
    X = centres[y] + spread * torch.randn(n_samples, n_features, generator=g)
    return X, y


def make_images(n_samples: int = 1024, n_classes: int = 10, noise: float = 0.5,
                seed: int = 0, task_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """1x32x32 images: each class has a smooth random template (an 8x8 pattern upsampled), each sample is its
    class template plus Gaussian ``noise``. Returns ``X`` (float32, ``(n, 1, 32, 32)``) and ``y``.
    ``task_seed`` draws the templates, ``seed`` the samples.

    >>> make_images(4, seed=0)[0].shape
    torch.Size([4, 1, 32, 32])
    """
    n_samples = check_int("n_samples", n_samples)
    n_classes = check_int("n_classes", n_classes, 2)
    if check_number("noise", noise, example="0.5") < 0:
        raise ValueError(f"noise must be a number >= 0 (e.g. 0.5); got {noise!r}")
    g = _gen(seed)
    coarse = torch.randn(n_classes, 1, 8, 8, generator=_gen(task_seed, "task_seed"))
    templates = F.interpolate(coarse, size=(32, 32), mode="bilinear", align_corners=False)
    y = torch.randint(0, n_classes, (n_samples,), generator=g)
    X = templates[y] + noise * torch.randn(n_samples, 1, 32, 32, generator=g)
    return X, y


def make_sequences(n_samples: int = 2048, seq_len: int = 16, vocab_size: int = 16, n_classes: int = 4,
                   planted: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token sequences: uniform random tokens, then the class token ``c`` (< ``n_classes``) is written at
    ``planted`` random positions; the label is ``c``. Solvable by attending to / pooling over tokens.
    Returns ``X`` (int64, ``(n, seq_len)``) and ``y``.

    >>> X, y = make_sequences(3, seq_len=8, seed=0); X.shape
    torch.Size([3, 8])
    """
    n_samples = check_int("n_samples", n_samples)
    seq_len = check_int("seq_len", seq_len)
    n_classes = check_int("n_classes", n_classes, 2)
    vocab_size = check_int("vocab_size", vocab_size, n_classes)
    planted = check_int("planted", planted)
    if planted > seq_len:
        raise ValueError(f"planted must be <= seq_len ({seq_len}); got {planted}")
    g = _gen(seed)
    X = torch.randint(0, vocab_size, (n_samples, seq_len), generator=g)
    y = torch.randint(0, n_classes, (n_samples,), generator=g)
    pos = torch.rand(n_samples, seq_len, generator=g).argsort(dim=1)[:, :planted]
    X.scatter_(1, pos, y[:, None].expand(-1, planted).contiguous())
    return X, y


def make_data(name: str, n_samples: int | None = None, seed: int = 0, **kw) -> tuple[torch.Tensor, torch.Tensor]:
    """The synthetic data set for a model name of :func:`ampkit.models.build_model` (with its default sizes).

    ``mlp``/``mlp_ln`` → :func:`make_blobs`; ``cnn``/``cnn_bn`` → :func:`make_images`; ``transformer`` →
    :func:`make_sequences`; ``decoder`` → :func:`make_char_windows` (``y`` is then ``(n, context)``). Extra
    keywords go to the generator.

    >>> make_data("transformer", 5)[0].dtype
    torch.int64
    """
    key = name.strip().lower() if isinstance(name, str) else name
    makers: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
        "mlp": make_blobs, "mlp_ln": make_blobs, "cnn": make_images, "cnn_bn": make_images,
        "transformer": make_sequences, "decoder": make_char_windows}
    if key not in makers:
        raise ValueError(f"data set name must be one of {', '.join(MODEL_NAMES)}; got {name!r}")
    if n_samples is not None:
        kw["n_samples"] = n_samples
    return makers[key](seed=seed, **kw)


def batches(X: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int = 0, shuffle: bool = True,
            drop_last: bool = False, epochs: int | None = 1) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield ``(xb, yb)`` mini-batches for ``epochs`` passes over the data (``None``: forever).

    With ``shuffle`` each epoch uses a fresh permutation drawn from a generator seeded by ``seed``, so the
    order is reproducible. ``drop_last`` drops a final short batch.

    >>> X, y = make_blobs(10, seed=0)
    >>> [len(b[0]) for b in batches(X, y, 4, shuffle=False)]
    [4, 4, 2]
    """
    if not isinstance(X, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("X and y must be torch tensors")
    if len(X) != len(y):
        raise ValueError(f"X and y must have the same length; got {len(X)} and {len(y)}")
    if len(X) == 0:
        raise ValueError("cannot batch an empty data set")
    batch_size = check_int("batch_size", batch_size)
    if epochs is not None:
        epochs = check_int("epochs", epochs)
    if drop_last and batch_size > len(X):
        raise ValueError(f"batch_size ({batch_size}) > number of samples ({len(X)}) with drop_last=True "
                         "yields nothing")
    g = _gen(seed)  # validated here, at the call, not at the first next()
    return _batch_iter(X, y, batch_size, g, shuffle, drop_last, epochs)


def _batch_iter(X: torch.Tensor, y: torch.Tensor, batch_size: int, g: torch.Generator, shuffle: bool,
                drop_last: bool, epochs: int | None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    n = len(X)
    stop = n - (n % batch_size) if drop_last else n
    epoch = 0
    while epochs is None or epoch < epochs:
        idx = torch.randperm(n, generator=g) if shuffle else torch.arange(n)
        for start in range(0, stop, batch_size):
            j = idx[start:start + batch_size]
            yield X[j], y[j]
        epoch += 1


# --- a character corpus for the decoder (notebook 07) -----------------------------------------------------------------

_NAMES = ("anna", "ben", "cleo", "dev", "emma", "finn", "gita", "hugo", "iris", "jon")
_NOUNS = ("cat", "dog", "bird", "fox", "horse", "mouse", "owl", "robot", "child", "farmer", "teacher", "zebra")
_THINGS = ("ball", "book", "apple", "box", "kite", "map", "lamp", "cake", "drum", "key", "boat", "hat")
_ADJS = ("red", "big", "small", "old", "new", "green", "quiet", "happy", "blue", "heavy")
_VERBS = ("sees", "finds", "likes", "wants", "takes", "gives", "paints", "hides", "carries", "moves")
_PLACES = ("the garden", "the house", "the river", "the market", "the school", "the forest", "the hill")
_PREPS = ("in", "near", "behind", "under", "over", "by")

#: The corpus alphabet: newline, space, punctuation, digits, lowercase letters (42 characters).
CHARS: str = "\n +,.=0123456789abcdefghijklmnopqrstuvwxyz"


class CharVocab:
    """A fixed character vocabulary: ``encode`` text to int64 ids, ``decode`` ids back to text.

    >>> v = CharVocab("ab ")
    >>> v.encode("ba a").tolist(), v.decode(v.encode("ba a")), len(v)
    ([1, 0, 2, 0], 'ba a', 3)
    """

    def __init__(self, chars: str = CHARS):
        if not isinstance(chars, str) or not chars:
            raise TypeError(f"chars must be a non-empty str of distinct characters; got {chars!r}")
        if len(set(chars)) != len(chars):
            raise ValueError(f"chars must be distinct characters; got {chars!r}")
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """``text`` as a 1-D int64 tensor of ids (ValueError naming any character not in the vocabulary)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        unknown = sorted(set(text) - set(self.index))
        if unknown:
            raise ValueError(f"characters {unknown!r} are not in the vocabulary {self.chars!r}")
        return torch.tensor([self.index[c] for c in text], dtype=torch.int64)

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        """Ids (a tensor or a list of ints) back to text."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        if any(not isinstance(i, int) or not 0 <= i < len(self.chars) for i in ids):
            raise ValueError(f"ids must be ints in 0..{len(self.chars) - 1}")
        return "".join(self.chars[i] for i in ids)


#: The vocabulary of :func:`make_corpus` (its size is :class:`ampkit.models.DecoderLM`'s default ``vocab_size``).
CHAR_VOCAB = CharVocab(CHARS)


def _pick(g: torch.Generator, words: tuple[str, ...]) -> str:
    return words[int(torch.randint(len(words), (1,), generator=g))]


def _line(g: torch.Generator) -> str:
    kind = int(torch.randint(5, (1,), generator=g))
    if kind == 0:
        a, b = (int(v) for v in torch.randint(0, 50, (2,), generator=g))
        return f"{a}+{b}={a + b}"
    subject = _pick(g, _NAMES) if kind == 1 else f"the {_pick(g, _ADJS)} {_pick(g, _NOUNS)}"
    adj = _pick(g, _ADJS)
    obj = f"{'an' if adj[0] in 'aeiou' else 'a'} {adj} {_pick(g, _THINGS)}"
    if kind == 4:
        return f"{subject} {_pick(g, _VERBS)} {obj}, then {_pick(g, _NAMES)} {_pick(g, _VERBS)} it."
    return f"{subject} {_pick(g, _VERBS)} {obj} {_pick(g, _PREPS)} {_pick(g, _PLACES)}."


def make_corpus(n_chars: int = 32768, seed: int = 0) -> str:
    """Text from a small grammar, one line per sentence: ``the old fox hides a red kite near the river.``,
    ``iris likes a big map, then ben paints it.`` and sums such as ``12+30=42``. Exactly ``n_chars``
    characters of :data:`CHARS`, the same for the same ``seed``; another seed gives other lines of the same
    grammar (a held-out text). Taught in notebook 07 (``07_transformers_in_16_bits.ipynb``).

    >>> print(make_corpus(103, seed=0))
    the heavy mouse moves a red cake, then hugo wants it.
    the old mouse moves a quiet ball over the school.
    """
    n_chars = check_int("n_chars", n_chars)
    g = _gen(seed)
    lines: list[str] = []
    total = 0
    while total < n_chars:
        lines.append(_line(g))
        total += len(lines[-1]) + 1
    return "\n".join(lines)[:n_chars]


def char_windows(ids: torch.Tensor, n_samples: int, context: int = 64,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_samples`` windows from random offsets of the 1-D id tensor ``ids``: ``x = ids[i : i+context]`` and the
    next characters ``y = ids[i+1 : i+context+1]``, both int64 ``(n_samples, context)``.

    >>> x, y = char_windows(torch.arange(10), 2, context=4, generator=torch.Generator().manual_seed(0))
    >>> bool((y == x + 1).all()), x.shape
    (True, torch.Size([2, 4]))
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.is_floating_point():
        raise TypeError("ids must be a 1-D integer tensor (e.g. CHAR_VOCAB.encode(text))")
    n_samples, context = check_int("n_samples", n_samples), check_int("context", context)
    if len(ids) <= context:
        raise ValueError(f"ids must be longer than context ({context}); got {len(ids)} ids")
    g = generator if generator is not None else _gen(0)
    starts = torch.randint(0, len(ids) - context, (n_samples,), generator=g)
    pos = starts[:, None] + torch.arange(context)
    return ids[pos], ids[pos + 1]


def make_char_windows(n_samples: int = 2048, context: int = 64, seed: int = 0, corpus_seed: int = 0,
                      n_chars: int = 32768) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-character windows ``(x, y)`` of :func:`make_corpus` (``corpus_seed``, ``n_chars``) drawn at offsets
    seeded by ``seed``: the data set of ``build_model("decoder")`` (train with :func:`ampkit.models.lm_loss`).

    >>> x, y = make_char_windows(3, context=8); x.shape, CHAR_VOCAB.decode(y[0][:-1]) == CHAR_VOCAB.decode(x[0][1:])
    (torch.Size([3, 8]), True)
    """
    ids = CHAR_VOCAB.encode(make_corpus(n_chars, seed=corpus_seed))
    return char_windows(ids, n_samples, context, _gen(seed))


def char_batches(ids: torch.Tensor, batch_size: int, context: int = 64, seed: int = 0,
                 steps: int | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield ``steps`` random mini-batches of :func:`char_windows` (``None``: forever), reproducible from ``seed``.

    >>> ids = CHAR_VOCAB.encode(make_corpus(500))
    >>> [tuple(x.shape) for x, _ in char_batches(ids, 4, context=16, steps=2)]
    [(4, 16), (4, 16)]
    """
    batch_size, context = check_int("batch_size", batch_size), check_int("context", context)
    if steps is not None:
        steps = check_int("steps", steps)
    char_windows(ids, 1, context)  # validated here, at the call, not at the first next()
    return _char_batch_iter(ids, batch_size, context, _gen(seed), steps)


def _char_batch_iter(ids: torch.Tensor, batch_size: int, context: int, g: torch.Generator,
                     steps: int | None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    step = 0
    while steps is None or step < steps:
        yield char_windows(ids, batch_size, context, g)
        step += 1
