"""The headless command line: a module per group of commands (cli/commands.py names them), what they share
(cli/common.py), the parser (cli/args.py) and the tables (cli/render.py, cli/render_facts.py)."""
