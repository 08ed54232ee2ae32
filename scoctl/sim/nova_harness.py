#!/usr/bin/python3
# mypy: allow-subclassing-any, allow-untyped-calls
"""A real Nova compute API on 127.0.0.1, for scoctl's adapter tests.

Run with Debian's ``/usr/bin/python3`` after ``scripts/setup-nova.sh`` (python3-nova 26.x, Zed,
microversion 2.93). This file is shipped inside the scoctl package only so that the tests can find
it; it never imports scoctl and scoctl never imports it.

What runs, all in this one process: Nova's own functional-test service harness
(``nova.tests.functional.integrated_helpers._IntegratedTestBase``) with the conductor, the
scheduler and one nova-compute on a fake virt driver, SQLite in memory, the ``fake://``
oslo.messaging transport, Placement in-process, and Nova's in-process Glance/Neutron/Cinder fakes.
On top of that a real eventlet WSGI listener (``nova.service.WSGIService('osapi_compute')``)
serves the API with ``[api]auth_strategy=noauth2``: the token is ``<user>:<project>``, and the
user ``admin`` gets an admin context.

RPC casts stay asynchronous (Nova's CastAsCallFixture is skipped), so clients see BUILD before
ACTIVE and the conductor's quota recheck can race exactly as in a real deployment.

Environment:
    NOVA_PORT            port to listen on; 0 (default) lets the OS choose
    NOVA_READY_FILE      written with the port number once the API serves
    NOVA_PASTE           api-paste.ini with the noauth2 pipelines
                         (default /var/cache/scoctl-test/nova/api-paste.ini)
    NOVA_HOST_VCPUS      capacity of the single fake compute host (default 64)
    NOVA_HOST_RAM_MB     (default 16000: m1.xlarge, 16384 MB, never fits)
    NOVA_HOST_DISK_GB    (default 4000)
    NOVA_QUOTA_INSTANCES / NOVA_QUOTA_CORES / NOVA_QUOTA_RAM   default project quota
Allocation ratios are 1.0 and nothing is reserved on the host, so the capacity above is exactly
what Placement hands out. Stops cleanly on SIGTERM or SIGINT.
"""

import nova.monkey_patch  # type: ignore[import-not-found]  # noqa: F401,I001  (first)

import os
import signal
import sys
import time
import unittest
from typing import Any

import eventlet.event  # type: ignore[import-not-found]
import webob.dec  # type: ignore[import-untyped]  # noqa: F401  (nova/api/wsgi.py needs it)
from nova import service
from nova.tests import fixtures as nova_fixtures  # type: ignore[import-not-found]
from nova.tests.functional import integrated_helpers  # type: ignore[import-not-found]
from nova.virt import fake  # type: ignore[import-not-found]

DEFAULT_PASTE = "/var/cache/scoctl-test/nova/api-paste.ini"
STARTED = time.monotonic()


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def _say(message: str) -> None:
    # Nova's fixtures capture sys.stderr; the real one is still reachable.
    stream = sys.__stderr__ or sys.stderr
    stream.write(message + "\n")
    stream.flush()


class HarnessDriver(fake.FakeDriver):
    """The fake virt driver with a host size chosen by the environment."""

    vcpus = _env_int("NOVA_HOST_VCPUS", 64)
    memory_mb = _env_int("NOVA_HOST_RAM_MB", 16000)
    local_gb = _env_int("NOVA_HOST_DISK_GB", 4000)


# Nova loads drivers only from under nova.virt, so publish ours there.
fake.HarnessDriver = HarnessDriver


class LoopbackNova(integrated_helpers._IntegratedTestBase):
    """One 'test' whose body serves the API until a stop signal arrives."""

    ADMIN_API = True
    microversion = "latest"

    def setUp(self) -> None:
        # Keep RPC casts asynchronous: drop CastAsCallFixture when the base class installs it.
        self.useFixture = self._use_fixture_keeping_casts_async
        super().setUp()

    def _use_fixture_keeping_casts_async(self, fixture: Any) -> Any:
        if isinstance(fixture, nova_fixtures.CastAsCallFixture):
            return fixture
        return super().useFixture(fixture)

    def _setup_compute_service(self) -> Any:
        self.flags(compute_driver="fake.HarnessDriver")
        self.flags(
            cpu_allocation_ratio=1.0,
            ram_allocation_ratio=1.0,
            disk_allocation_ratio=1.0,
            reserved_host_memory_mb=0,
            reserved_host_disk_mb=0,
        )
        return self._start_compute("compute")

    def _setup_services(self) -> None:
        # api-paste.ini ships in nova-common, not python3-nova; setup-nova.sh extracts it.
        paste = os.environ.get("NOVA_PASTE") or DEFAULT_PASTE
        if not os.path.exists(paste):
            raise SystemExit(f"api-paste.ini not found at {paste}: run scripts/setup-nova.sh")
        self.flags(api_paste_config=paste, group="wsgi")
        super()._setup_services()

    def test_serve(self) -> None:
        quota = {}
        for key in ("instances", "cores", "ram"):
            value = os.environ.get("NOVA_QUOTA_" + key.upper(), "").strip()
            if value:
                quota[key] = int(value)
        if quota:
            self.flags(group="quota", **quota)
        self.flags(auth_strategy="noauth2", group="api")
        self.flags(
            osapi_compute_listen="127.0.0.1",
            osapi_compute_listen_port=_env_int("NOVA_PORT", 0),
            osapi_compute_workers=1,
        )
        server = service.WSGIService("osapi_compute", use_ssl=False)
        server.start()
        stop = eventlet.event.Event()

        def on_signal(signum: int, frame: Any) -> None:
            if not stop.ready():
                stop.send(signum)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        ready = os.environ.get("NOVA_READY_FILE")
        if ready:
            # Write then rename, so a reader never sees a half-written port.
            with open(ready + ".part", "w") as handle:
                handle.write(str(server.port))
            os.rename(ready + ".part", ready)
        _say(
            f"nova harness serving http://127.0.0.1:{server.port}/v2.1"
            f" after {time.monotonic() - STARTED:.1f} s"
        )
        stop.wait()
        server.stop()
        _say("nova harness stopped")


def main() -> int:
    """Run the harness until SIGTERM; exit 0 when it stopped cleanly."""
    suite = unittest.TestSuite([LoopbackNova("test_serve")])
    result = unittest.TextTestRunner(stream=sys.__stderr__ or sys.stderr, verbosity=1).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
