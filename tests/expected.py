"""The canonical cancellation results, written out from the original's rules (not taken from the
implementation), for the tests that expect them."""

from __future__ import annotations

from dsh_tools import TextBlock, ToolErrorInfo, ToolExecutionResult

ABORTED = ToolExecutionResult(
    content=(TextBlock(text="Error: tool call aborted"),),
    is_error=True,
    error=ToolErrorInfo(name="AbortError", code="ABORTED"),
)
ABORTED_BEFORE_DISPATCH = ToolExecutionResult(
    content=(TextBlock(text="Error: tool call aborted before dispatch"),),
    is_error=True,
    error=ToolErrorInfo(name="AbortError", code="ABORTED_BEFORE_DISPATCH"),
)
