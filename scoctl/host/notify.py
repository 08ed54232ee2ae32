"""systemd's notify protocol (sd_notify(3)): one datagram per message to $NOTIFY_SOCKET.

The socket is an AF_UNIX datagram socket named by the environment variable; a name starting
with ``@`` is in the abstract namespace (a leading NUL byte). Without the variable (not started
by systemd with ``Type=notify``) every call is a no-op. `watchdog_interval` reads
$WATCHDOG_USEC (set with ``WatchdogSec=``): ping at least twice per interval.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    """Sends ``READY=1``, ``STATUS=…``, ``WATCHDOG=1``, ``RELOADING=1``, ``STOPPING=1``."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        name = env.get("NOTIFY_SOCKET", "")
        self.address: str | bytes | None = None
        if name.startswith("@"):
            self.address = b"\0" + name[1:].encode()
        elif name.startswith("/"):
            self.address = name
        watchdog = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        self.watchdog = int(watchdog) / 1e6 if watchdog.isdigit() and mine else None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        """Send one message of ``KEY=VALUE`` lines; False when there is no socket or the send
        failed (systemd gone: the service goes on, only unsupervised)."""
        if self.address is None:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(self.address)
                sock.sendall("\n".join(fields).encode())
        except OSError:
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def ping(self) -> bool:
        """Tell the watchdog the main loop is alive."""
        return self.send("WATCHDOG=1") if self.watchdog is not None else False

    def reloading(self) -> bool:
        return self.send("RELOADING=1")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")
