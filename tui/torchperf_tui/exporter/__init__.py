"""`torchperf-tui exporter`: GPU telemetry, the host and the history's latest outcomes for Prometheus.

gpu_metrics.py (DCGM exporter's names through the NVML seam), host_metrics.py (CPU and memory), outcomes.py (the
history's newest record per set-up), server.py (readings every interval, served by prometheus-client). The CLI's
side is cli/exporter.py; the Grafana dashboard over these metrics is grafana/torchperf-dashboard.json.
"""
