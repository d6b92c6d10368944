"""The experiment engine the run stage drives: a trial session over the study (``session``), the
search loop (``search_loop``), re-verification's conclusion (``conclusion``), the run's summary
(``summary``) and what a busy machine costs (``quiet``, which verify shares). Below the stages:
nothing here imports ``infrarsi.stages`` (tests/test_layers.py)."""
