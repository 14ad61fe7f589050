"""Benchmarks, one script per op (``bench_<op>.py``) plus the model-level ``bench_model``; ``common`` holds
the shared machinery and ``plot`` draws the CSV. Run them with ``torchtrt-plugins bench`` or
``python -m torchtrt_plugins.benchmarks.bench_<op>``."""
