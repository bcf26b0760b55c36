"""The measurement process and the way to it: the one place where torch work runs for the TUI and the CLI.

client.py decides when a process starts and talks to it (the UI's and the CLI's side), spawn.py launches one,
protocol.py is what crosses the socket, process.py is the process's main loop (`python -m torchperf_tui.measure`), runners.py the job kinds it
runs. selection.py freezes what the user chose into a request; follow_up.py holds the steps after a run that
both front ends take; cli_jobs.py runs one job to its end for the CLI.
"""
