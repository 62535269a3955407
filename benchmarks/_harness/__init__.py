"""What several benchmarks share: process measurements, local federations of site daemons, the study's anchor."""

from .process import cpu_seconds, memory_and_peak_mb, memory_mb, peak_mb, reset_peak, trim_heap, worker_answer
from .sites import (DELTA, EPSILON, READY, ROOT, TOKEN, site_configs, site_data, start_daemons, stop, write_data,
                    write_dev_sites, write_sites)
from .study import minimal_replication, study_worker

__all__ = ["cpu_seconds", "memory_and_peak_mb", "memory_mb", "peak_mb", "reset_peak", "trim_heap", "worker_answer",
           "DELTA", "EPSILON",
           "READY", "ROOT", "TOKEN", "site_configs", "site_data", "start_daemons", "stop", "write_data", "write_dev_sites",
           "write_sites",
           "minimal_replication", "study_worker"]
