"""The policy in use by a running server, reloaded when its file changes.

A reload validates the new file completely and then swaps one immutable :class:`Settings` object
(an atomic reference assignment), so a request sees either the old policy or the new one, never a
mix. An invalid file keeps the last good policy, logs why, and flips a metric; the same broken file
is not re-parsed until it changes again.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable

from webhook.core import settings as settings_mod
from webhook.core.settings import Settings, SettingsError
from webhook.server.filewatch import FileWatch

log = logging.getLogger("gpu_admission.config")

ReloadHook = Callable[[str, str | None], None]
"""Called with (result, error): result is ``success`` or ``failure``."""


class LiveSettings:
    """Holds the current settings; ``current()`` is cheap enough to call on every request."""

    def __init__(self, path: str | Path | None = None, *, interval: float = 1.0,
                 on_reload: ReloadHook | None = None, initial: Settings | None = None,
                 fallback: Settings | None = None) -> None:
        """``fallback``: the policy to start with when the file does not load now (a server worker
        started while the file is broken keeps the server's last good policy); without it that raises."""
        self.path = Path(path) if path is not None else None
        self._on_reload = on_reload
        self.last_error: str | None = None
        # the file's state is taken before reading it, so a change made while it is read is not missed
        self._watch = FileWatch([self.path], interval=interval) if self.path is not None else None
        try:
            self._settings = initial or settings_mod.load(self.path, read=Path.read_bytes)
        except SettingsError as exc:
            if fallback is None:
                raise
            self._settings, self.last_error = fallback, str(exc)
            log.error("policy file does not load, starting with the last good policy: %s", exc,
                      extra={"event": "config_reload", "result": "failure"})

    @classmethod
    def fixed(cls, settings: Settings) -> "LiveSettings":
        """Settings that never reload (tests, and the embedded default)."""
        return cls(None, initial=settings)

    def watch_in_background(self, interval: float) -> threading.Thread | None:
        """Check the file every ``interval`` seconds even without traffic, so every worker of a
        server follows the file at the same pace (an idle worker would otherwise keep an older
        policy once the file turns invalid) and ``gpu_admission_config_valid`` does not lag."""
        if self.path is None:
            return None

        def loop() -> None:
            while True:
                time.sleep(interval)
                try:
                    self.current()
                except Exception:  # noqa: BLE001 - the watcher must outlive any surprise
                    log.exception("policy watcher error")

        thread = threading.Thread(target=loop, name="gpu-admission-policy-watch", daemon=True)
        thread.start()
        return thread

    def set_hook(self, hook: ReloadHook | None) -> None:
        self._on_reload = hook

    def current(self) -> Settings:
        if self._watch is not None:
            signature = self._watch.changed()
            if signature is not None:
                self._reload(signature)
        return self._settings

    def _reload(self, signature: tuple) -> None:
        assert self.path is not None and self._watch is not None
        try:
            fresh = settings_mod.load(self.path, read=Path.read_bytes)
        except SettingsError as exc:
            self._watch.accept(signature)  # do not re-parse the same broken file every second
            self.last_error = str(exc)
            log.error("policy reload failed, keeping the last good policy: %s", exc,
                      extra={"event": "config_reload", "result": "failure"})
            if self._on_reload:
                self._on_reload("failure", str(exc))
            return
        self._watch.accept(signature)
        self._settings = fresh
        self.last_error = None
        log.info("policy reloaded from %s", self.path, extra={"event": "config_reload", "result": "success"})
        if self._on_reload:
            self._on_reload("success", None)
