"""The Sweep pane: latency and memory against sequence length."""
