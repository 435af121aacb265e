"""A small torch.compile (Inductor, CPU) run for the replay tests: Inductor's own passes on a graph
where some of them change something (a full slice and a same-shape view for remove_noop_ops)."""

import torch


def f(x, w):
    y = x @ w
    y = y[:, :]  # a full slice: remove_noop_ops drops it
    y = y.view(y.shape)  # a same-shape view: dropped too
    return torch.relu(y) * 2.0 + 1.0


def main() -> None:
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    out = torch.compile(f)(x, w)
    print(f"ok {float(out.sum())!r}", flush=True)


if __name__ == "__main__":
    main()
