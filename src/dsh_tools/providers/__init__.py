"""Provider adapters: the glue between a model API's wire shapes and dsh-tools.

- :mod:`dsh_tools.providers.openai`: OpenAI Chat Completions and Responses.
- :mod:`dsh_tools.providers.anthropic`: Anthropic Messages.

Each adapter is a handful of pure functions over plain ``dict``/``list`` data: schemas out as
``tools=[...]`` entries, the model's tool calls in as :class:`~dsh_tools.ToolCallRequest`, a
:class:`~dsh_tools.ToolBatch` out as the messages that carry its results. No provider SDK is
imported: SDK response objects are accepted through their ``model_dump()``, and everything
produced is plain JSON data that the SDKs' request types accept.
"""

from ._common import JsonDict as JsonDict
from ._common import SupportsModelDump as SupportsModelDump

__all__ = ["JsonDict", "SupportsModelDump"]
