"""Where every app is built: the command line's (app/launch.py), the screenshot script's and the tests'.

An app runs on this box's own device, telemetry and measurement process unless it is given others as objects
(Seams): a fake measurement client that answers with recorded results, a fixed device report, a frozen telemetry
source, fake NVML and CUDA backends. Whoever builds the app passes them in; nothing here knows where they come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torchperf_tui.app.app import TorchperfApp


@dataclass(frozen=True)
class Seams:
    """What an app is given instead of this box's own (None: its own). `measurement`: makes the measurement
    process's client, `measurement(on_event=, on_notice=, cpus=)` (app/session.py); `device_report`: a fixed
    DeviceReport; `telemetry`: an object with .sample() and .history; `nvml`, `cuda`: fake NVML and CUDA
    backends."""

    measurement: Callable[..., Any] | None = None
    device_report: Any = None
    telemetry: Any = None
    nvml: Any = None
    cuda: Any = None


def make_app(seams: Seams | None = None, **options: Any) -> TorchperfApp:
    """The app with `options` (TorchperfApp's keywords) on `seams`."""
    seams = seams or Seams()
    return TorchperfApp(measurement=seams.measurement, device_report=seams.device_report,
                        telemetry=seams.telemetry, nvml=seams.nvml, cuda=seams.cuda, **options)


def app_options(args: Any) -> dict[str, Any]:
    """The app's keywords from the command line's options (the parser's namespace): a transformers demo
    (--demo) starts on its model with its small config and length, unless the user gave others."""
    model_args, seq_len = args.app_model_args or "", args.app_seq_len or ""
    if args.demo is not None:
        from torchperf_tui.app.demo_attention import demo_inputs  # with --demo only: not on the first frame's path

        model_args, seq_len = demo_inputs(args.demo, model_args, seq_len)
    return dict(model=args.demo or args.model, autostart=args.autostart, interval=args.interval,
                device=args.app_device, history_path=args.history, demo=args.demo is not None,
                screenshot_dir=args.screenshot_dir, model_args=model_args, seq_len=seq_len,
                mlflow_uri=getattr(args, "app_mlflow", None))
