"""The learned generator's classifier at inference (engine.learned.generator.ClassifierForward): numpy on the torch
module's weights gives the module's own logits, one question or a batch."""

from __future__ import annotations

import numpy as np
import torch

from engine.learned.generator import ClassifierForward, TemplateClassifier, featurize


def test_numpy_forward_equals_the_torch_module() -> None:
    torch.manual_seed(0)
    model = TemplateClassifier(16, 9, buckets=64, hidden=8, shape_buckets=32, skeletons=[i % 4 for i in range(9)])
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    model.eval()
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(3, 16)).astype(np.float32)
    words, shapes = [[1, 2, 3, 60], [7], [0, 5]], [[1, 2], [31], [4, 5, 6]]
    align, contrast, cover = (rng.random((3, 9)).astype(np.float32) for _ in range(3))
    with torch.no_grad():
        want = model(torch.as_tensor(emb), *featurize(words), *featurize(shapes), torch.as_tensor(align),
                     torch.as_tensor(contrast), torch.as_tensor(cover)).double().numpy()
    forward = ClassifierForward(model)
    got = forward(emb, words, shapes, align, contrast, cover)
    assert got.shape == (3, 10) and got.dtype == np.float64
    assert np.allclose(got, want, rtol=1e-5, atol=1e-4)
    one = forward(emb[1:2], words[1:2], shapes[1:2], align[1:2], contrast[1:2], cover[1:2])
    assert np.allclose(one[0], want[1], rtol=1e-5, atol=1e-4)
