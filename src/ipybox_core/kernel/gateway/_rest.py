"""The gateway's REST API for kernels: create, inspect, interrupt, restart, delete."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import httpx2

from ipybox_core.errors import KernelError, KernelStartError
from ipybox_core.kernel.gateway.config import GatewayConfig

logger = logging.getLogger(__name__)


class GatewayRest:
    """One HTTP client per kernel, with the gateway's token on every request."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._client = httpx2.AsyncClient(
            base_url=config.url,
            headers=config.auth_headers,
            verify=config.verify,
            timeout=config.request_timeout,
            trust_env=False,
        )

    async def start_kernel(self, env: Mapping[str, str], timeout: float) -> str:
        """Start a kernel; returns its id. Raises :class:`KernelStartError`."""
        body: dict[str, Any] = {"env": dict(env)}
        if self.config.kernel_name:
            body["name"] = self.config.kernel_name
        response = await self._request("POST", "/api/kernels", KernelStartError, json=body, timeout=timeout)
        kernel_id = _json(response).get("id")
        if response.status_code not in (200, 201) or not isinstance(kernel_id, str):
            raise KernelStartError(self._failure("start a kernel", response) + await self._spec_hint())
        return kernel_id

    async def _spec_hint(self) -> str:
        """Why a start may have failed: the requested kernel spec is not on the gateway."""
        name = self.config.kernel_name
        if not name:
            return ""
        try:
            response = await self._client.get("/api/kernelspecs")
            specs = _json(response).get("kernelspecs")
        except httpx2.HTTPError:
            return ""
        if not isinstance(specs, dict) or name in specs:
            return ""
        return f"; it has no kernel spec {name!r} (available: {', '.join(sorted(specs)) or 'none'})"

    async def kernel_state(self, kernel_id: str) -> str | None:
        """The kernel's ``execution_state`` (``"idle"``, ``"busy"``, ``"dead"``, ...); None if the
        gateway does not know the kernel (deleted, culled, gateway restarted)."""
        response = await self._request("GET", f"/api/kernels/{kernel_id}", KernelError)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise KernelError(self._failure("ask for the kernel's state", response))
        return str(_json(response).get("execution_state", "unknown"))

    async def interrupt(self, kernel_id: str) -> None:
        response = await self._request("POST", f"/api/kernels/{kernel_id}/interrupt", KernelError)
        if response.status_code not in (200, 204):
            raise KernelError(self._failure("interrupt the kernel", response))

    async def restart(self, kernel_id: str, timeout: float) -> bool:
        """Restart the kernel in place; False if the gateway does not know it (start a new one)."""
        response = await self._request(
            "POST", f"/api/kernels/{kernel_id}/restart", KernelStartError, timeout=timeout
        )
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            raise KernelStartError(self._failure("restart the kernel", response))
        return True

    async def delete(self, kernel_id: str) -> None:
        """Shut the kernel down (a kernel the gateway no longer knows is fine)."""
        response = await self._request("DELETE", f"/api/kernels/{kernel_id}", KernelError)
        if response.status_code not in (200, 204, 404):
            raise KernelError(self._failure("shut down the kernel", response))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        error: type[KernelError],
        *,
        json: Any = None,
        timeout: float | None = None,
    ) -> httpx2.Response:
        try:
            response = await self._client.request(
                method, path, json=json, timeout=timeout if timeout is not None else httpx2.USE_CLIENT_DEFAULT
            )
        except httpx2.TimeoutException:
            raise error(
                f"the kernel gateway at {self.config.url} did not answer {method} {path} in time"
            ) from None
        except httpx2.HTTPError as exc:
            raise error(f"cannot reach the kernel gateway at {self.config.url}: {exc}") from None
        if response.status_code in (401, 403):
            raise error(self._failure(f"{method} {path}", response))
        return response

    def _failure(self, action: str, response: httpx2.Response) -> str:
        body = _json(response)
        detail = body.get("message") or body.get("reason") or response.text[:300].strip()
        hint = ""
        if response.status_code == 401:
            hint = " (check gateway_token / GatewayConfig.token)"
        elif response.status_code == 403:
            hint = " (the gateway refused: kernel limit reached or the operation is not allowed)"
        return (
            f"the kernel gateway at {self.config.url} could not {action}: "
            f"HTTP {response.status_code} {detail}{hint}"
        ).rstrip()


def delete_kernel_now(config: GatewayConfig, kernel_id: str) -> None:
    """Synchronous, best-effort kernel deletion (for finalizers: garbage collection, interpreter exit)."""
    with (
        contextlib.suppress(Exception),
        httpx2.Client(
            base_url=config.url,
            headers=config.auth_headers,
            verify=config.verify,
            timeout=5.0,
            trust_env=False,
        ) as client,
    ):
        client.delete(f"/api/kernels/{kernel_id}")
        logger.debug("deleted abandoned gateway kernel %s", kernel_id)


def _json(response: httpx2.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
