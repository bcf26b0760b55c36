"""The ground floor, torch-free: errors, option checks, statistics, file reads and writes, formatting.
Everything may use it; it uses nothing above."""
