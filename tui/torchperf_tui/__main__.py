"""`python -m torchperf_tui` is the same as the `torchperf-tui` console script."""

from torchperf_tui.entry import main

raise SystemExit(main())
