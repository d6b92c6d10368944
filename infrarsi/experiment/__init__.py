"""The experiment engine the run stage drives: the study store (``store``; Optuna's private API in
``optuna_adapter``; a round several workers share in ``shared_round``), a trial session over it
(``session``), the search loop (``search_loop``), re-verification's conclusion (``conclusion``;
the value in ``concluded``), the run's summary (``summary``), the run's record built once from
what those return (``run_record``), what a busy machine costs (``quiet``) and the one object that
runs and reruns a trial (``trial_runner``, which doctor and verify use too).
Below the stages: nothing here imports ``infrarsi.stages`` (tests/test_layers.py)."""
