"""Test kit for tools, hooks and batches (``pip install 'dsh-tools[testing]'``).

- Scripted tools: :func:`scripted_tool` with the steps :func:`sleep`, :func:`checkpoint`,
  :func:`fail`, :func:`hang`, :func:`shielded`, :func:`inject`, :func:`returns`; each tool records its runs.
- Fault injection: :func:`cancel_at` a virtual time or a :class:`StageReached`;
  :func:`explore_cancellations` (every point a cancellation can land) and
  :func:`explore_crashes` (every append a process can die after), each checking every run.
- Invariants: :func:`check_batch`.
- Hypothesis strategies: :mod:`dsh_tools.testing.strategies` (imported on its own, so this
  package and its pytest plugin work without Hypothesis).
- A pytest plugin (:mod:`dsh_tools.testing.pytest_plugin`) with the ``registry`` and
  ``session_log`` fixtures.
"""

from . import _explore, _faults, _invariants, _scripted
from ._explore import Exploration as Exploration
from ._explore import ExplorationFailure as ExplorationFailure
from ._explore import ExplorationPoint as ExplorationPoint
from ._explore import ExplorationRun as ExplorationRun
from ._explore import explore_cancellations as explore_cancellations
from ._explore import explore_crashes as explore_crashes
from ._faults import STAGES as STAGES
from ._faults import CallStage as CallStage
from ._faults import StageReached as StageReached
from ._faults import cancel_at as cancel_at
from ._invariants import check_batch as check_batch
from ._scripted import CheckpointStep as CheckpointStep
from ._scripted import FailStep as FailStep
from ._scripted import HangStep as HangStep
from ._scripted import InjectStep as InjectStep
from ._scripted import ReturnsStep as ReturnsStep
from ._scripted import RunEnding as RunEnding
from ._scripted import ScriptedRun as ScriptedRun
from ._scripted import ScriptedTool as ScriptedTool
from ._scripted import ShieldedStep as ShieldedStep
from ._scripted import SleepStep as SleepStep
from ._scripted import Step as Step
from ._scripted import checkpoint as checkpoint
from ._scripted import fail as fail
from ._scripted import hang as hang
from ._scripted import inject as inject
from ._scripted import returns as returns
from ._scripted import scripted_tool as scripted_tool
from ._scripted import shielded as shielded
from ._scripted import sleep as sleep

# what the four modules export is what this package publishes
__all__: list[str] = []
__all__ += _explore.__all__
__all__ += _faults.__all__
__all__ += _invariants.__all__
__all__ += _scripted.__all__
