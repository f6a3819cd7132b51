"""The command line front door: ``gpu-admission`` (console script ``webhook.cli.main:main``).

Owns: argument parsing and exit codes (``main``), reading the files a user names (``sources``:
manifests from files, directories and stdin, through PyYAML's C loader; policy
files), the parallel checker for large inputs (``check_pool``), the report renderers (``report``:
text, JSON, JUnit) and the people-facing ``explain`` view, ``inventory`` (a fleet from saved or
live Nodes), ``certs`` (a development CA and serving certificate) and ``install`` (the
generated-certs overlay writer).

Imports: the core only through the public modules listed in :data:`webhook.core.PUBLIC`, and the
server only through the names in ``webhook.server.__all__`` (``serve`` hands off to
``webhook.server.run``); never a server module directly. tests/test_architecture.py holds it.
"""
