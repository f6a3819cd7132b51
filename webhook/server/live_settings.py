"""The policy in use by a running server, reloaded when its file changes, the same in every worker.

A reload validates the new file completely and then swaps one immutable :class:`Settings` object
(an atomic reference assignment), so a request sees either the old policy or the new one, never a
mix. An invalid file keeps the last good policy, logs why, and flips a metric; the same broken file
is not re-parsed until it changes again.

The last good policy is shared through a file (:class:`LastGood`), not through memory: every worker
that loads the policy file writes its bytes to the last good copy (atomically, only when they
differ), and a worker that cannot load the file serves that copy, validated again with the same
parser. So a worker forked after a failed reload (gunicorn respawning one that was killed, or the
second of two that started while the file broke) serves what its siblings serve, not the policy
the master held at start-up; and while the file stays broken every worker follows the copy, so one
that never saw a version its sibling loaded catches up. In the pod the copy sits in the emptyDir at
``/tmp``: a restarted container finds it too. A worker with neither a loadable file nor a copy has
no policy: :meth:`LiveSettings.current` raises :class:`PolicyUnavailable` (the server answers 503
and ``/readyz`` says why) until the file loads.

Which policy a worker serves is its generation (:attr:`Settings.generation`, a hash of the file's
bytes): the same in every worker that serves the same file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
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

ChangeHook = Callable[[Settings | None], None]
"""Called with the policy now served (None: none) whenever it changes."""

STATE_DIR_NAME = "gpu-admission"
"""The directory under ``$TMPDIR`` that holds the last good copies, by default."""


class PolicyUnavailable(SettingsError):
    """No policy to judge with: the file does not load and there is no last good copy of it."""


class LastGood:
    """The last good text of one policy file, on disk, for every worker of the server (and any later
    start of it that sees the same directory: the pod's emptyDir survives a container restart)."""

    def __init__(self, path: Path, *, config: Path | None = None) -> None:
        self.path = Path(path)
        self.config = config
        self._warned = False

    @classmethod
    def for_config(cls, config: str | Path, state_dir: str | Path | None = None) -> "LastGood":
        """The copy of ``config``: in ``state_dir`` (default ``$TMPDIR/gpu-admission``), named by a hash
        of the file's absolute path (symlinks not resolved: a ConfigMap mount swaps ``..data``), so two
        servers of different files on one host keep different copies."""
        directory = Path(state_dir) if state_dir is not None else Path(tempfile.gettempdir()) / STATE_DIR_NAME
        key = hashlib.sha256(os.path.abspath(config).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return cls(directory / f"last-good-policy-{key}.yaml", config=Path(config))

    def save(self, data: bytes) -> None:
        """Keep ``data`` (a policy file's bytes that just loaded) as the last good copy: atomically
        (a reader sees the old copy or the new one), and not at all when the copy already holds them."""
        try:
            if self.path.read_bytes() == data:
                return
        except OSError:
            pass
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
        except OSError as exc:
            try:
                tmp.unlink()
            except OSError:
                pass
            if not self._warned:  # once: the server works without it, each worker on its own
                self._warned = True
                log.warning("cannot keep the last good policy in %s (%s): a worker that starts while the "
                            "policy file is broken will have no policy", self.path, exc.strerror or exc,
                            extra={"event": "config_last_good", "result": "failure"})

    def load(self) -> Settings | None:
        """The last good copy, validated again like the file itself; None when there is none (or it
        does not load: a copy is only ever served whole)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read the last good policy %s: %s", self.path, exc.strerror or exc,
                        extra={"event": "config_last_good", "result": "failure"})
            return None
        of = f"{self.config} " if self.config is not None else ""
        try:
            return settings_mod.parse_text(data.decode("utf-8"), source=f"{of}(last good copy {self.path})")
        except (UnicodeDecodeError, SettingsError) as exc:
            log.error("the last good policy %s does not load, ignored: %s", self.path, exc,
                      extra={"event": "config_last_good", "result": "failure"})
            return None


class LiveSettings:
    """Holds the current settings; ``current()`` is cheap enough to call on every request."""

    def __init__(self, path: str | Path | None = None, *, interval: float = 1.0,
                 on_reload: ReloadHook | None = None, initial: Settings | None = None,
                 last_good: LastGood | None = None) -> None:
        """``last_good``: where the server keeps the last good copy of the file (shared by its workers);
        without it a worker that starts while the file does not load has no policy until it does."""
        self.path = Path(path) if path is not None else None
        self._on_reload = on_reload
        self._on_change: ChangeHook | None = None
        self.last_error: str | None = None
        self._last_good = last_good if self.path is not None else None
        # the file's state is taken before reading it, so a change made while it is read is not missed
        self._watch = FileWatch([self.path], interval=interval) if self.path is not None else None
        self._copy_watch = (FileWatch([self._last_good.path], interval=interval)
                            if self._last_good is not None else None)
        self._swap_lock = threading.Lock()
        """One reload or adoption of the copy at a time (the watcher thread and request threads both
        look), so a copy read before a good reload can never be swapped in after it."""
        self._settings: Settings | None
        if initial is not None or self.path is None:
            self._settings = initial or settings_mod.default()
            return
        try:
            self._settings = self._load_file()
        except SettingsError as exc:
            self.last_error = str(exc)
            self._settings = self._last_good.load() if self._last_good is not None else None
            if self._settings is not None:
                log.error("policy file does not load, serving its last good copy (generation %s): %s",
                          self._settings.generation, exc, extra={"event": "config_reload", "result": "failure"})
            else:
                log.error("policy file does not load and there is no last good copy: not ready until it "
                          "loads: %s", exc, extra={"event": "config_reload", "result": "failure"})

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
                    self.refresh()
                except Exception:  # noqa: BLE001 - the watcher must outlive any surprise
                    log.exception("policy watcher error")

        thread = threading.Thread(target=loop, name="gpu-admission-policy-watch", daemon=True)
        thread.start()
        return thread

    def set_hook(self, hook: ReloadHook | None) -> None:
        self._on_reload = hook

    def on_change(self, hook: ChangeHook | None) -> None:
        """Call ``hook`` with the policy served now, and again whenever that changes."""
        self._on_change = hook
        if hook is not None:
            hook(self._settings)

    def peek(self) -> Settings | None:
        """The policy served now (None: none), without looking at the file."""
        return self._settings

    def refresh(self) -> Settings | None:
        """Follow the file (and, while it is broken, the last good copy); the policy served now."""
        if self._watch is not None:
            signature = self._watch.changed()
            if signature is not None:
                self._reload(signature)
            elif self.last_error is not None and self._copy_watch is not None:
                # the file is broken: a sibling may have kept a version this worker never loaded
                copied = self._copy_watch.changed()
                if copied is not None:
                    self._copy_watch.accept(copied)
                    with self._swap_lock:
                        self._adopt_copy()
        return self._settings

    def current(self) -> Settings:
        """The policy to judge with; :class:`PolicyUnavailable` when there is none."""
        settings = self.refresh()
        if settings is None:
            raise PolicyUnavailable(self.last_error or "no policy loaded")
        return settings

    def _load_file(self) -> Settings:
        """The policy file, loaded; its bytes become the last good copy."""
        assert self.path is not None
        read: list[bytes] = []

        def reading(path: Path) -> bytes:
            read.append(path.read_bytes())
            return read[-1]

        fresh = settings_mod.load(self.path, read=reading)
        if self._last_good is not None:
            self._last_good.save(read[-1])
        return fresh

    def _swap(self, settings: Settings | None) -> None:
        self._settings = settings
        if self._on_change is not None:
            self._on_change(settings)

    def _adopt_copy(self) -> None:
        """While the file does not load: serve the last good copy when it is another policy than this
        worker's (a newer version a sibling loaded, or any policy at all when this worker has none).
        Called with ``_swap_lock`` held."""
        if self.last_error is None:  # the file loaded meanwhile: it wins
            return
        copy = self._last_good.load() if self._last_good is not None else None
        if copy is None or (self._settings is not None and copy.generation == self._settings.generation):
            return
        log.warning("serving the last good copy of the policy (generation %s), as the other workers do",
                    copy.generation, extra={"event": "config_reload", "result": "last_good"})
        self._swap(copy)

    def _reload(self, signature: tuple) -> None:
        with self._swap_lock:
            self._reload_locked(signature)

    def _reload_locked(self, signature: tuple) -> None:
        assert self.path is not None and self._watch is not None
        try:
            fresh = self._load_file()
        except SettingsError as exc:
            self._watch.accept(signature)  # do not re-parse the same broken file every second
            self.last_error = str(exc)
            log.error("policy reload failed, keeping the last good policy: %s", exc,
                      extra={"event": "config_reload", "result": "failure"})
            self._adopt_copy()
            if self._on_reload:
                self._on_reload("failure", str(exc))
            return
        self._watch.accept(signature)
        self.last_error = None
        self._swap(fresh)
        log.info("policy reloaded from %s (generation %s)", self.path, fresh.generation,
                 extra={"event": "config_reload", "result": "success"})
        if self._on_reload:
            self._on_reload("success", None)
