"""Tools from MCP servers: ``mount_mcp`` registers every tool of a connected ``mcp.Client``
into a registry or a scope (extra ``[mcp]``; the core never imports this package).
"""

from ._mount import MCP_TOOL_ERROR as MCP_TOOL_ERROR
from ._mount import McpConnectionError as McpConnectionError
from ._mount import McpToolError as McpToolError
from ._mount import MountedServer as MountedServer
from ._mount import MountTarget as MountTarget
from ._mount import mount_mcp as mount_mcp

__all__ = [
    "MCP_TOOL_ERROR",
    "McpConnectionError",
    "McpToolError",
    "MountTarget",
    "MountedServer",
    "mount_mcp",
]
