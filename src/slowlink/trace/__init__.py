"""PyTorch profiler (Kineto) traces read as measurements: per rank the steps, kernel time by kind, idle time and
communication/computation overlap, and per collective its calls, bytes, time and achieved bus bandwidth."""
