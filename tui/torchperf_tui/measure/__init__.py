"""The measurement process and the way to it: the one place where torch work runs for the TUI and the CLI.

jobs.py is the table of job kinds (what runs each, whether it measures, the CLI command and the app's keys and pane
that send it); client.py decides when a process starts and talks to it (the UI's and the CLI's side), spawn.py
launches one, protocol.py is what crosses the socket, process.py is the process's main loop (`python -m
torchperf_tui.measure`), runners.py (and generation_runners.py) what each job kind runs. selection.py freezes what
the user chose into a request; follow_up.py holds the steps after a run that both front ends take; cli_jobs.py runs a
command's jobs to their end for the CLI.
"""
