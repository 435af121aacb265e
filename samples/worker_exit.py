"""Ending a torch.distributed worker once its work is done, without the interpreter's finalization.

Why: with gloo, a ``ProcessGroupGloo`` run-loop thread can hold the last reference to a
finished collective's work, and through it to tensors that still own Python objects, for a
moment after the main thread was told the work is done. If the main thread reaches the
interpreter's finalization in that moment, the run-loop thread asks for the GIL, Python ends
it with ``pthread_exit``, and the unwind through a ``noexcept`` destructor calls
``std::terminate``: the worker dies with SIGABRT ("terminate called without an active
exception") after its training finished, and torchrun reports the job failed. Seen with
torch 2.13 on CPU in about 1 of 60 two-rank runs of the sample, and in our CI; the backtrace
(gdb, every thread) is ``ProcessGroupGloo::runLoop -> ~AsyncWork -> TensorImpl::decref_pyobject
-> gil_scoped_acquire -> take_gil -> PyThread_exit_thread``, while the main thread is in
``Py_FinalizeEx``. ``destroy_process_group`` does not prevent it (the run-loop threads are
still there at finalization).

``end_worker`` tears the process group down, runs the exit handlers (the capture's own
``stop``, torch's log handlers) while the interpreter is whole, and ends the process with
``os._exit``, so no thread can meet a half-finalized interpreter. It changes nothing the
worker computed or wrote.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn


def end_worker(code: int = 0) -> NoReturn:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    atexit._run_exitfuncs()  # what a normal exit runs first; os._exit skips it
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more to say there
            pass
    os._exit(code)
