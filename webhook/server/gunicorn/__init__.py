"""The server's process machinery: how gunicorn runs the admission app, kept apart from what the
app decides.

Owns: ``application`` (the gunicorn arbiter application and :func:`run`: worker count, TLS through
the ``ssl_context`` hook, the shared metrics directory, the node watch per worker), ``balance``
(the gthread worker that spreads keep-alive connections evenly over the workers), ``closing``
(graceful closes off the worker's main loop), ``reading`` (a request is read whole by the poller within a deadline, so slow clients hold no
thread), ``compat`` (the gthread internals all of these build on, in one place), ``overload`` (reviews that waited past the
apiserver's timeout answered 503 at once), ``tls`` (the rotating, hardened TLS context) and
``listeners`` (the opt-in extender listener: its TLS context and app by the port of a connection).

Imports: the rest of :mod:`webhook.server` and the core's public modules; never :mod:`webhook.cli`.
The sub-package is named after the server it adapts; absolute imports keep ``import gunicorn``
inside it meaning the real gunicorn.
"""
