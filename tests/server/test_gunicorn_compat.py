"""The gthread internals webhook/server/gunicorn/ builds on are all in the installed gunicorn."""

from webhook.server.gunicorn import compat


def test_the_installed_gunicorn_has_every_gthread_piece_the_workers_use() -> None:
    assert compat.check() == []


def test_the_check_can_fail() -> None:
    saved = compat.OVERRIDDEN
    try:
        compat.OVERRIDDEN = saved + ("no_such_method",)
        assert compat.check() == ["ThreadWorker.no_such_method"]
    finally:
        compat.OVERRIDDEN = saved
