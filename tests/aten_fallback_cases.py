"""Models whose ATen nodes our converters of ``converters.aten_fallbacks`` take, for the tt and trt tiers
(tests/tt/test_aten_fallbacks_tt.py, tests/trt/test_aten_fallbacks_trt.py)."""

from __future__ import annotations

import torch


class Pool(torch.nn.Module):
    def __init__(self, ceil_mode: bool):
        super().__init__()
        self.pool = torch.nn.AvgPool2d(2, 2, 0, ceil_mode=ceil_mode)

    def forward(self, x):
        return self.pool(x.relu()) * 2


class Baddbmm(torch.nn.Module):
    """Mask2Former's form: ``baddbmm(mask, query, key)``, scaled as asked."""

    def __init__(self, beta: float, alpha: float):
        super().__init__()
        self.beta, self.alpha = beta, alpha

    def forward(self, base, batch1, batch2):
        return torch.baddbmm(base.relu(), batch1, batch2, beta=self.beta, alpha=self.alpha).sigmoid()


#: ``(beta, alpha)`` of the baddbmm cases, by id.
BADDBMM_SCALES = {"plain": (1, 1), "scaled": (0.5, 2.0), "beta0": (0, 1)}


def baddbmm_inputs(device: str = "cpu") -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(shape, generator=generator).to(device) for shape in ((2, 5, 4), (2, 5, 16), (2, 16, 4))]


class Attention(torch.nn.Module):
    """Attention with no mask, a boolean mask or an additive one (``scores_bias``)."""

    def __init__(self, mask: str, is_causal: bool = False):
        super().__init__()
        self.mask, self.is_causal = mask, is_causal

    def forward(self, q, k, v, scores_bias):
        mask = {"none": None, "bool": scores_bias > -0.5, "float": scores_bias}[self.mask]
        out = torch.nn.functional.scaled_dot_product_attention(
            q.relu(), k, v, attn_mask=mask, is_causal=self.is_causal, scale=0.2 if self.mask == "float" else None
        )
        return out * 2


ATTENTION_MASKS = ("none", "bool", "float")


def attention_inputs(value_dim: int, device: str = "cpu") -> list[torch.Tensor]:
    """ConditionalDETR's cross-attention shapes: 5 queries, 4 keys, head dim 32, value head dim ``value_dim``."""
    generator = torch.Generator().manual_seed(0)
    shapes = ((1, 2, 5, 32), (1, 2, 4, 32), (1, 2, 4, value_dim), (1, 1, 5, 4))
    return [torch.randn(shape, generator=generator).to(device) for shape in shapes]


class TopHalf(torch.nn.Module):
    """The top half of ``n`` scores: a SymInt ``k`` as torchvision's one-stage postprocessing has (there
    ``min(candidates, n)`` of a data-dependent ``n``: the zoo's full-TensorRT partition)."""

    def __init__(self, largest: bool = True):
        super().__init__()
        self.largest = largest

    def forward(self, scores):
        values, indices = scores.sigmoid().topk(scores.shape[0] // 2, largest=self.largest)
        return values * 2, indices


def top_half_dynamic_shapes(max_k: int) -> tuple[dict, ...]:
    """An even dynamic ``n`` up to ``2 * max_k`` (export proves ``n // 2 <= n`` for ``n = 2 * half`` only)."""
    return ({0: 2 * torch.export.Dim("half", min=1, max=max_k)},)


class Keep(torch.nn.Module):
    """torchvision's postprocessing: the scores above a threshold and their boxes (``scores[keep]``,
    ``boxes[keep]``)."""

    def forward(self, scores, boxes):
        keep = scores > 0.5
        return scores[keep] * 2, boxes[keep] + 1


def keep_inputs(device: str = "cpu") -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.rand(40, generator=generator).to(device), torch.randn(40, 4, generator=generator).to(device)]


class IsIn(torch.nn.Module):
    """GroundingDino's special-token mask: ``torch.isin(input_ids, special_tokens)`` (a buffer), or one token."""

    def __init__(self, invert: bool = False, scalar: bool = False):
        super().__init__()
        self.invert, self.scalar = invert, scalar
        self.register_buffer("special", torch.tensor([1, 3, 4]))

    def forward(self, ids):
        test = 3 if self.scalar else self.special
        return torch.isin(ids, test, invert=self.invert) & (ids > 0)


def isin_inputs(device: str = "cpu") -> list[torch.Tensor]:
    return [torch.randint(0, 6, (2, 9), generator=torch.Generator().manual_seed(0)).to(device)]


class Cumulative(torch.nn.Module):
    """``torch.cummax`` or ``torch.cummin`` along ``dim`` (GroundingDino's previous and next special token)."""

    def __init__(self, op: str, dim: int):
        super().__init__()
        self.op, self.dim = getattr(torch, op), dim

    def forward(self, x):
        values, indices = self.op(x, self.dim)
        return values, indices + 1


#: Input dtypes of the Cumulative cases: ties everywhere (few distinct values), floats with NaNs.
CUMULATIVE_DTYPES = ("float32", "float16", "int32", "int64", "bool")


def cumulative_inputs(dtype: str, shape: tuple[int, ...] = (3, 7, 5), device: str = "cpu") -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randint(0, 4, shape, generator=generator)
    if dtype == "bool":
        x = x > 1
    elif dtype.startswith("float"):
        x = x.to(getattr(torch, dtype)).masked_fill(torch.rand(shape, generator=generator) < 0.08, float("nan"))
    else:
        x = x.to(getattr(torch, dtype))
    return [x.to(device)]
