"""The data files of the core (GPU catalog, instance types, model catalog, default policy), read by ``webhook.core.bundled``.

A package only so that setuptools installs the directory as one (``setup.cfg``, package_data): nothing
imports it.
"""
