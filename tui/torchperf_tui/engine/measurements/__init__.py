"""How it is measured: the run's config and preamble, the timed loop and its statistics, the flags and torch
state, training steps, A/B, throughput, timing modes, determinism and the memory snapshot."""
