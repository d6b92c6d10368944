"""Reading a training repo's knobs without running it: discovery (libcst), the role catalog, and rewriting defaults."""
