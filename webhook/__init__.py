"""gpu-admission: keep multi-GPU AI workloads on homogeneous, fitting GPU hardware.

The package is one pure core (``workloads`` -> ``inference`` -> ``policy`` -> ``patches``, glued by
``engine``) with thin front doors around it (``cli`` now, the admission server next).
"""

__version__ = "0.1.0"
