"""The five stages (init, doctor, run, report, apply): each returns data and prints nothing."""
