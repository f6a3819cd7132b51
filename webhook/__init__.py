"""gpu-admission: keep multi-GPU AI workloads on homogeneous, fitting GPU hardware.

One pure core with two thin front doors, one folder each (ARCHITECTURE.md draws it):

- :mod:`webhook.core`: object -> templates -> profile -> decision -> patches; no I/O, no clock;
- :mod:`webhook.server`: the HTTPS admission server kube-apiserver calls (gunicorn machinery in
  :mod:`webhook.server.gunicorn`);
- :mod:`webhook.cli`: the ``gpu-admission`` command line (``check``, ``explain``, ``serve``, ...).

The doors call the core only through its public modules (:data:`webhook.core.PUBLIC`), so the live
webhook and the CI checker run the same code and cannot disagree.
"""

__version__ = "0.1.0"
"""The one place the version is written: setup.cfg reads it (``attr:``), ``gpu-admission --version``
prints it."""
