"""parsim.search.planner.paused_gc: the collector paused inside, restored after, nothing left frozen,
a caller's frozen objects kept frozen, and a cycle made inside still collected afterwards."""

import gc
import weakref

from parsim.search.planner import paused_gc


class _Node:
    pass


def _cycle():
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_restores_the_collector_and_leaves_nothing_frozen():
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():                      # nested: the inner exit leaves it paused
            pass
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_cycle_made_inside_is_still_collected():
    with paused_gc():
        ref = _cycle()
    assert ref() is not None                  # promoted, not scanned yet
    gc.collect()
    assert ref() is None


def test_a_callers_frozen_objects_stay_frozen():
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with paused_gc():
            _cycle()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
