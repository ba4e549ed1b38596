"""The check a batch runs when it is set up: approval that its calls could never get warns
(:class:`~dsh_tools.ApprovalSetupWarning`) then, not only in text the model reads later.
"""

from __future__ import annotations

import warnings

from dsh_tools._errors import ApprovalSetupWarning

from ._approval import UserApproval
from ._ask_before import AskBefore
from ._call import PipelineHost

__all__ = ["check_approval_setup"]


def check_approval_setup(
    host: PipelineHost, agent: object, *, answerers: bool = True, stacklevel: int = 3
) -> None:
    """Warn (:class:`~dsh_tools.ApprovalSetupWarning`) about approval that a batch of
    ``agent`` on ``host`` could never get. Only what the library can see for sure: an
    ``ask_before`` policy that hears the batch on a registry with no approval service, or with
    calls that have no agent to route a request through; a :class:`UserApproval` none of whose
    answerers hears ``agent`` (with ``answerers``), when the batch has an ``ask_before`` policy
    or the service's answerers all listen to other agents. Not a checkpoint.
    """
    listeners = host.hooks.pre_execute
    if not listeners.active:
        return
    heard = listeners.for_agent(agent)
    if not heard:
        return
    policies = [listener for listener in heard if isinstance(listener, AskBefore)]
    service = host.approval
    if service is None:
        if policies:
            warnings.warn(
                f"{policies[0]!r} asks for approval, but the registry has no approval service: "
                "every such call is denied; pass ToolRegistry(approval=UserApproval(session))",
                ApprovalSetupWarning,
                stacklevel=stacklevel,
            )
        return
    if agent is None:
        if policies:
            warnings.warn(
                f"{policies[0]!r} asks for approval, but the batch's calls have no agent to "
                "route a request through: every such call is denied; pass "
                "run_tool_calls(..., agent=...)",
                ApprovalSetupWarning,
                stacklevel=stacklevel,
            )
        return
    if not (answerers and isinstance(service, UserApproval)) or service.hears(agent):
        return
    if not policies and not service.statistics().answerers:
        return  # nothing says this batch asks, and no answerer was meant for anyone
    if service.policy == "never":
        return
    warnings.warn(
        f"no approval answerer hears agent {agent!r} (none global, none in its scope): "
        "every Ask is answered unavailable; add one with approval.answerers.add(...) or "
        "approval.scope(agent).answerers.add(...) for this very agent object",
        ApprovalSetupWarning,
        stacklevel=stacklevel,
    )
