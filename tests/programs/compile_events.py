"""Four torch.compile events on one rank, the ones a new user meets first:

* `f`: a print() inside a compiled function: a graph break (torch restarts the analysis, then
  resumes in `torch_dynamo_resume_in_f_at_...`);
* `h`: a data-dependent branch, `if x.sum() > 0:`: a graph break;
* `f` called again with another shape: a recompile, with the guard that failed;
* `g`, compiled with fullgraph=True, with a data-dependent branch: the compile fails
  (`Unsupported`), and the call raises; the program catches it and runs on.

Run it as `TORCH_TRACE=DIR python -m tests.programs.compile_events` (or under `capture`).
"""

import torch


@torch.compile(backend="aot_eager")
def f(x):
    y = x * 2
    print("inside f")
    return y + 1


@torch.compile(backend="aot_eager")
def h(x):
    if x.sum() > 0:
        return x - 1
    return x + 1


@torch.compile(backend="aot_eager", fullgraph=True)
def g(x):
    y = x.cos()
    if y.sum() > 0:
        return y * 3
    return y


def main() -> None:
    f(torch.ones(4))
    h(torch.ones(4))
    f(torch.ones(5, 3))
    try:
        g(torch.ones(4))
    except Exception as e:  # noqa: BLE001 - the fullgraph failure is the point: report it, go on
        print(f"g failed: {type(e).__name__}", flush=True)


if __name__ == "__main__":
    main()
