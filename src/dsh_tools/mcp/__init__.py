"""Tools from MCP servers: ``mount_mcp`` registers every tool of a connected ``mcp.Client``
into a registry or a scope; ``open_stdio_client`` connects to a stdio server whose stderr goes
to the ``dsh_tools.mcp`` logger (extra ``[mcp]``; the core never imports this package).
"""

from dsh_tools._for_integrations import raise_missing_extra

try:
    from . import _mount, _stdio
    from ._mount import MCP_TOOL_ERROR as MCP_TOOL_ERROR
    from ._mount import McpConnectionError as McpConnectionError
    from ._mount import McpToolError as McpToolError
    from ._mount import MountedServer as MountedServer
    from ._mount import MountTarget as MountTarget
    from ._mount import mount_mcp as mount_mcp
    from ._stdio import STDERR_LOGGER as STDERR_LOGGER
    from ._stdio import open_stdio_client as open_stdio_client
except ModuleNotFoundError as exc:
    raise_missing_extra(
        exc, "mcp", "mcp >= 2, jsonschema and google-re2", ("mcp", "jsonschema", "re2")
    )

# what the two modules export is what this package publishes
__all__: list[str] = []
__all__ += _mount.__all__
__all__ += _stdio.__all__
