"""UI-free glue shared by the CLI and the TUI: the measurement process client and the steps both front ends take."""
