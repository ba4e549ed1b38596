"""`Disposer`: the undo handle every registration returns."""

from __future__ import annotations

import pytest

from dsh_tools import Disposer
from dsh_tools._values._disposer import DisposerGroup


def _counting() -> tuple[Disposer, list[str]]:
    calls: list[str] = []
    return Disposer(lambda: calls.append("undone")), calls


def test_calling_a_disposer_runs_its_undo() -> None:
    dispose, calls = _counting()

    dispose()

    assert calls == ["undone"]


def test_a_disposer_runs_its_undo_only_once() -> None:
    dispose, calls = _counting()

    dispose()
    dispose()
    dispose()

    assert calls == ["undone"]


def test_a_disposer_reports_whether_it_has_run() -> None:
    dispose, _calls = _counting()
    before = dispose.disposed

    dispose()

    assert (before, dispose.disposed) == (False, True)


def test_a_disposer_used_as_a_context_manager_disposes_on_exit() -> None:
    dispose, calls = _counting()

    with dispose as entered:
        assert entered is dispose
        assert calls == []

    assert calls == ["undone"]


def test_a_disposer_used_as_a_context_manager_disposes_when_the_block_raises() -> None:
    dispose, calls = _counting()

    with pytest.raises(KeyError), dispose:
        raise KeyError("x")

    assert calls == ["undone"]


def test_a_disposer_disposed_inside_its_block_does_not_run_again_on_exit() -> None:
    dispose, calls = _counting()

    with dispose:
        dispose()

    assert calls == ["undone"]


def test_a_failing_undo_propagates_once_and_still_counts_as_disposed() -> None:
    def undo() -> None:
        raise RuntimeError("undo failed")

    dispose = Disposer(undo)

    with pytest.raises(RuntimeError, match="undo failed"):
        dispose()
    dispose()

    assert dispose.disposed


def test_a_noop_disposer_does_nothing_and_is_not_yet_disposed() -> None:
    dispose = Disposer.noop()
    before = dispose.disposed

    dispose()

    assert (before, dispose.disposed) == (False, True)


def test_a_disposer_s_repr_shows_its_state() -> None:
    dispose = Disposer.noop()
    before = repr(dispose)
    dispose()

    assert (before, repr(dispose)) == ("<Disposer active>", "<Disposer disposed>")


def test_a_group_releases_what_it_holds_last_first_and_forgets_what_was_released_alone() -> None:
    order: list[str] = []
    group = DisposerGroup("this scope")
    first = group.own(Disposer(lambda: order.append("first")))
    group.own(Disposer(lambda: order.append("second")))
    group.own(Disposer(lambda: order.append("third")))
    first()

    assert group.close() is True
    assert group.close() is False
    assert ["first", "third", "second"] == order


def test_a_closed_group_undoes_a_late_registration_and_refuses_it() -> None:
    undone: list[str] = []
    group = DisposerGroup("this scope")
    group.close()

    with pytest.raises(RuntimeError, match=r"^this scope is closed$"):
        group.own(Disposer(lambda: undone.append("late")))
    assert ["late"] == undone
