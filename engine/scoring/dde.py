"""Directional Distance Encoding (SubgraphRAG, paper 000, §3.2; DIGEST §1.1)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["DDE", "mean_aggregate"]


def mean_aggregate(x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``out[v] = mean{x[u] | edge u -> v}`` (one message per edge); a node with no incoming edge gets 0."""
    out = torch.zeros(num_nodes, x.shape[1], dtype=x.dtype, device=x.device)
    out.index_add_(0, dst, x.index_select(0, src))
    deg = torch.zeros(num_nodes, dtype=x.dtype, device=x.device)
    deg.index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
    return out / deg.clamp_(min=1).unsqueeze(1)


class DDE(nn.Module):
    r"""Directional Distance Encoding of each entity relative to the topic entities (no parameters).

    .. math::
        \mathbf{s}^{(0)}_e = [1, 0] \text{ if } e \in \mathcal{T}_q \text{ else } [0, 1]

        \mathbf{s}^{(l+1)}_e = \mathrm{MEAN}\{\mathbf{s}^{(l)}_{e'} \mid (e', r, e) \in \mathcal{G}\}
        \qquad \text{(forward: over heads of the triples whose tail is } e)

        \mathbf{s}^{(r,l+1)}_e = \mathrm{MEAN}\{\mathbf{s}^{(r,l)}_{e'} \mid (e, r, e') \in \mathcal{G}\},
        \quad \mathbf{s}^{(r,0)} = \mathbf{s}^{(0)} \qquad \text{(reverse: over tails of the triples whose head is } e)

        \mathbf{s}_e = [\mathbf{s}^{(0)}_e \,\|\, \mathbf{s}^{(1)}_e \| \dots \| \mathbf{s}^{(L)}_e
        \,\|\, \mathbf{s}^{(r,1)}_e \| \dots \| \mathbf{s}^{(r,L_r)}_e]

    The mean counts one message per triple (parallel triples count several times) and a node without
    incoming messages gets 0, as PyG's ``aggr="mean"``. ``s^(0)`` is prepended only with
    ``include_initial=True`` (the paper's formula); the reference code leaves it out (DIGEST §1.1 [CODE]),
    which is the default here. A triple's structural feature is ``[s_h || s_t]``.

    Args:
        rounds: forward rounds L (default 2).
        reverse_rounds: reverse rounds L_r (default: same as ``rounds``).
        include_initial: prepend ``s^(0)``.

    Shapes:
        - **input:** ``num_nodes``, ``edge_index [2, E]`` (head -> tail), ``topic`` as indices ``[T]`` or a
          bool mask ``[N]``
        - **output:** ``[N, out_dim]`` with ``out_dim = 2 * (L + L_r) (+ 2)``
    """

    def __init__(self, rounds: int = 2, reverse_rounds: int | None = None, include_initial: bool = False) -> None:
        super().__init__()
        if rounds < 0 or (reverse_rounds is not None and reverse_rounds < 0):
            raise ValueError("DDE rounds must be >= 0")
        self.rounds = rounds
        self.reverse_rounds = rounds if reverse_rounds is None else reverse_rounds
        self.include_initial = include_initial

    @property
    def out_dim(self) -> int:
        return 2 * (self.rounds + self.reverse_rounds) + (2 if self.include_initial else 0)

    def forward(self, num_nodes: int, edge_index: torch.Tensor, topic: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        device = edge_index.device
        if topic.dtype == torch.bool:
            is_topic = topic
        else:
            is_topic = torch.zeros(num_nodes, dtype=torch.bool, device=device)
            is_topic[topic.long()] = True
        s0 = torch.stack([is_topic, ~is_topic], dim=1).to(dtype)
        head, tail = edge_index[0], edge_index[1]
        parts = [s0] if self.include_initial else []
        s = s0
        for _ in range(self.rounds):
            s = mean_aggregate(s, head, tail, num_nodes)
            parts.append(s)
        s = s0
        for _ in range(self.reverse_rounds):
            s = mean_aggregate(s, tail, head, num_nodes)
            parts.append(s)
        if not parts:
            return s0.new_zeros(num_nodes, 0)
        return torch.cat(parts, dim=1)

    def extra_repr(self) -> str:
        return f"rounds={self.rounds}, reverse_rounds={self.reverse_rounds}, include_initial={self.include_initial}"
