"""Sustained-clock benchmarking and profiling harness for GPU attention kernels.

Importing this package does nothing but define names: no GPU, NVML or model is touched until a
function is called.

>>> import harness
>>> harness.__version__
'0.1.0'
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
