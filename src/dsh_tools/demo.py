"""Deprecated: the demo moved beside the command line that runs it, to :mod:`dsh_tools.cli.demo`
(its workspace and tools: :mod:`dsh_tools.cli.demo_tools`; its printed view:
:mod:`dsh_tools.cli.plain_demo`).

Importing this module warns (:class:`DeprecationWarning`) and gives the names it held.
"""

import warnings

from dsh_tools.cli.demo import BATCH_1 as BATCH_1
from dsh_tools.cli.demo import BATCH_2 as BATCH_2
from dsh_tools.cli.demo import BATCH_3 as BATCH_3
from dsh_tools.cli.demo import INTERRUPT_AFTER as INTERRUPT_AFTER
from dsh_tools.cli.demo import MAX_PARALLEL as MAX_PARALLEL
from dsh_tools.cli.demo import DemoAgent as DemoAgent
from dsh_tools.cli.demo import DemoBatch as DemoBatch
from dsh_tools.cli.demo import default_log_path as default_log_path
from dsh_tools.cli.demo import execution_text as execution_text
from dsh_tools.cli.demo import first_line as first_line
from dsh_tools.cli.demo import open_file_log as open_file_log
from dsh_tools.cli.demo import outcome as outcome
from dsh_tools.cli.demo import run_demo as run_demo
from dsh_tools.cli.demo_tools import WORKSPACE_ROOT as WORKSPACE_ROOT
from dsh_tools.cli.demo_tools import FetchArgs as FetchArgs
from dsh_tools.cli.demo_tools import ReadFileArgs as ReadFileArgs
from dsh_tools.cli.demo_tools import RunCommandArgs as RunCommandArgs
from dsh_tools.cli.demo_tools import SearchArgs as SearchArgs
from dsh_tools.cli.demo_tools import Workspace as Workspace
from dsh_tools.cli.demo_tools import WriteFileArgs as WriteFileArgs
from dsh_tools.cli.demo_tools import build_registry as build_registry
from dsh_tools.cli.demo_tools import demo_registry as demo_registry
from dsh_tools.cli.demo_tools import hunks as hunks
from dsh_tools.cli.demo_tools import sample_workspace as sample_workspace
from dsh_tools.cli.plain_demo import COLUMNS_PER_SECOND as COLUMNS_PER_SECOND
from dsh_tools.cli.plain_demo import describe_call_view as describe_call_view
from dsh_tools.cli.plain_demo import describe_result_view as describe_result_view
from dsh_tools.cli.plain_demo import main_demo as main_demo
from dsh_tools.cli.plain_demo import render_batch as render_batch

__all__ = [
    "DemoAgent",
    "DemoBatch",
    "build_registry",
    "default_log_path",
    "demo_registry",
    "execution_text",
    "first_line",
    "hunks",
    "main_demo",
    "open_file_log",
    "run_demo",
    "sample_workspace",
]

warnings.warn(
    "dsh_tools.demo is deprecated: the demo moved to dsh_tools.cli.demo "
    "(its tools to dsh_tools.cli.demo_tools, its printed view to dsh_tools.cli.plain_demo)",
    DeprecationWarning,
    stacklevel=2,
)
