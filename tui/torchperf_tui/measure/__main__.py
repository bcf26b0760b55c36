"""`python -m torchperf_tui.measure FD LOG [prints-to-stderr]`: the measurement process, started by measure/spawn.py (for client.py) with one end
of a socket pair as file descriptor FD."""

import sys

from torchperf_tui.measure.process import serve_fd

serve_fd(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None, sys.argv[3] if len(sys.argv) > 3 else None)
