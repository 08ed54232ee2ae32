"""Bootstrap token Secrets in ``kube-system`` (`adapters.bootstrap.BootstrapTokens`): create,
list (name, launch and expiration only: the token's secret is never read out) and delete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scoctl.adapters.kube_client import KubeClient
from scoctl.adapters.kube_convert import (
    token_secret,
)
from scoctl.core.jointoken import TOKEN_NAMESPACE, TOKEN_TYPE
from scoctl.core.model import (
    TokenSecret,
)
from scoctl.core.model.vocabulary import LABEL_LAUNCH, LABEL_MANAGED


class BootstrapTokenSecrets(KubeClient):
    """`BootstrapTokens` over the official client."""

    def create_bootstrap_token(self, manifest: Mapping[str, Any]) -> None:
        """See `BootstrapTokens.create_bootstrap_token`."""
        meta = manifest["metadata"]
        self._call(f"create Secret {meta['namespace']}/{meta['name']}",
                   self._core.create_namespaced_secret, str(meta["namespace"]),
                   body=dict(manifest))

    def bootstrap_tokens(self) -> list[TokenSecret]:
        """See `BootstrapTokens.bootstrap_tokens`."""
        body = self._read_unless_gone(
            "list bootstrap token Secrets", self._core.list_namespaced_secret, TOKEN_NAMESPACE,
            label_selector=f"{LABEL_MANAGED}=true,{LABEL_LAUNCH}",
            field_selector=f"type={TOKEN_TYPE}")
        items = body.get("items") if body is not None else None
        return [token_secret(item) for item in items or [] if isinstance(item, Mapping)]

    def delete_bootstrap_token(self, name: str) -> bool:
        """See `BootstrapTokens.delete_bootstrap_token`."""
        return self._unless_gone(f"delete Secret {TOKEN_NAMESPACE}/{name}",
                                 self._core.delete_namespaced_secret, name, TOKEN_NAMESPACE)
