"""The join-credential seam: bootstrap token Secrets in the Kubernetes API (design: Operating).

`KubernetesCluster` implements `BootstrapTokens`; `services.join_tokens` uses it to create one
token per launch and delete it once the launch no longer needs it (`core.jointoken`). The
token's secret half is sent to the API and never returned: listings give names, launches and
expirations only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from scoctl.core.model import TokenSecret


@runtime_checkable
class BootstrapTokens(Protocol):
    """Bootstrap token Secrets scoctl creates in ``kube-system``."""

    def create_bootstrap_token(self, manifest: Mapping[str, Any]) -> None:
        """Create the Secret `manifest` (`core.jointoken.secret_manifest`).

        Raises TemporaryError (API down, 5xx, 429; 409: the token id is taken, another will
        do) or PermanentError (403: no RBAC to create Secrets in kube-system), never naming
        the token's secret.
        """
        ...

    def bootstrap_tokens(self) -> list[TokenSecret]:
        """scoctl's bootstrap token Secrets (labelled ``sco/managed=true`` and ``sco/launch``).

        Raises TemporaryError or PermanentError.
        """
        ...

    def delete_bootstrap_token(self, name: str) -> bool:
        """Delete the Secret `name` in kube-system; False when it was already gone.

        Raises TemporaryError or PermanentError.
        """
        ...
