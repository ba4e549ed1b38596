"""Tools from MCP servers: ``mount_mcp`` registers every tool of a connected ``mcp.Client``
into a registry or a scope; ``open_stdio_client`` connects to a stdio server whose stderr goes
to the ``dsh_tools.mcp`` logger (extra ``[mcp]``; the core never imports this package).
"""

try:
    from ._mount import MCP_TOOL_ERROR as MCP_TOOL_ERROR
    from ._mount import McpConnectionError as McpConnectionError
    from ._mount import McpToolError as McpToolError
    from ._mount import MountedServer as MountedServer
    from ._mount import MountTarget as MountTarget
    from ._mount import mount_mcp as mount_mcp
    from ._stdio import STDERR_LOGGER as STDERR_LOGGER
    from ._stdio import open_stdio_client as open_stdio_client
except ModuleNotFoundError as exc:
    if (exc.name or "").partition(".")[0] not in ("mcp", "jsonschema"):
        raise
    raise ModuleNotFoundError(
        f"dsh_tools.mcp needs the [mcp] extra (mcp >= 2 and jsonschema): {exc}; "
        "install it with: python -m pip install 'dsh-tools[mcp]'",
        name=exc.name,
    ) from exc

__all__ = [
    "MCP_TOOL_ERROR",
    "McpConnectionError",
    "McpToolError",
    "MountTarget",
    "MountedServer",
    "STDERR_LOGGER",
    "mount_mcp",
    "open_stdio_client",
]
