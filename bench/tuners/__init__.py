"""InfraRSI against the tuners people use instead, through InfraRSI's own runner and contract.

``measure_space`` measures a reduced but real space of a fixture once (every configuration, with
repeats) into ``bench/data/<fixture>_space.json``; ``replay`` runs every method on that table for
many seeds with the measured noise; ``live`` runs every method for real through the run stage.
``metrics`` and ``report`` compute and print what both modes report. See docs/benchmarks.md.
"""
