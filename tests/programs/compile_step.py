"""torch.compile (Inductor, CPU) of a small training step, for capturing Inductor's own passes."""

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)) * 2 + 1)


def main() -> None:
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    step_fn = torch.compile(lambda x, y: torch.nn.functional.mse_loss(net(x), y))
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    for i in range(3):
        opt.zero_grad()
        loss = step_fn(x, y)
        loss.backward()
        opt.step()
        print(f"step {i} loss {loss.item()!r}", flush=True)


if __name__ == "__main__":
    main()
