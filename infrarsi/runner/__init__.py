"""Running one candidate of a training job for real, in isolation, and measuring it.

- ``trial``: ``TrialSpec`` and ``run_trial`` — the only entry point; the steps below in order.
- ``workspace``: the isolated copy, patches and flag-less knobs written into it, its diff.
- ``command``: the argv (``python``/``torchrun`` resolved to this interpreter, knob flags).
- ``process``: the process tree in its own session; killing all of it; Ctrl-C/SIGTERM handling.
- ``watchdog``: tree RSS polling, the peak, the kill above the memory budget.
- ``measure``: steps from the launcher's records (infrarsi/launcher), timed by InfraRSI's clock on arrival.
- ``checks`` / ``abort``: the contract's invariants and the early-abort rule.
- ``result``: the typed values a trial returns (shared with the search and the report).
"""
