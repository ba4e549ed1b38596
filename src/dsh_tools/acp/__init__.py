"""Serve editors over the Agent Client Protocol (ACP): the bridge and ``dsh-tools acp``.

- :class:`AcpSessionBridge` maps a session's ``tool/call`` / ``tool/result`` events to ACP
  ``session/update`` payloads, through a :class:`~dsh_tools.ToolPresenter`.
- :class:`AcpPermissionAnswerer` answers a :class:`~dsh_tools.UserApproval`'s requests by
  sending ``session/request_permission`` to the client.
- :class:`JsonRpcConnection` is a trio-native JSON-RPC 2.0 peer over newline-delimited JSON
  (ACP's stdio transport).
- :func:`main` is ``dsh-tools acp``: a demo agent over stdio (needs the ``[acp]`` extra).

Not re-exported from :mod:`dsh_tools`; the core never imports this package.
"""

from ._bridge import AcpSessionBridge as AcpSessionBridge
from ._bridge import relativize_title as relativize_title
from ._jsonrpc import INTERNAL_ERROR as INTERNAL_ERROR
from ._jsonrpc import INVALID_PARAMS as INVALID_PARAMS
from ._jsonrpc import INVALID_REQUEST as INVALID_REQUEST
from ._jsonrpc import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from ._jsonrpc import PARSE_ERROR as PARSE_ERROR
from ._jsonrpc import ConnectionClosedError as ConnectionClosedError
from ._jsonrpc import JsonRpcConnection as JsonRpcConnection
from ._jsonrpc import JsonRpcError as JsonRpcError
from ._jsonrpc import JsonRpcHandler as JsonRpcHandler
from ._main import main as main
from ._main import serve_stdio as serve_stdio
from ._permission import AcpPermissionAnswerer as AcpPermissionAnswerer

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "AcpPermissionAnswerer",
    "AcpSessionBridge",
    "ConnectionClosedError",
    "JsonRpcConnection",
    "JsonRpcError",
    "JsonRpcHandler",
    "main",
    "relativize_title",
    "serve_stdio",
]
