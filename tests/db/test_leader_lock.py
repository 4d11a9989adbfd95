"""The maintenance leader's lease: renewed by its holder, taken by another once it lapses."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.maintenance.locks import hold_lock, release_lock

pytestmark = pytest.mark.django_db


def test_the_holder_renews_and_others_wait_for_the_lapse():
    now = timezone.now()
    assert hold_lock("leader", "a", now=now, hold_seconds=10)
    assert not hold_lock("leader", "b", now=now + timedelta(seconds=5), hold_seconds=10)
    assert hold_lock("leader", "a", now=now + timedelta(seconds=9), hold_seconds=10)  # renewed
    assert not hold_lock("leader", "b", now=now + timedelta(seconds=15), hold_seconds=10)
    assert hold_lock("leader", "b", now=now + timedelta(seconds=19), hold_seconds=10)
    assert not hold_lock("leader", "a", now=now + timedelta(seconds=20), hold_seconds=10)


def test_a_released_lease_is_free_at_once():
    now = timezone.now()
    assert hold_lock("leader", "a", now=now, hold_seconds=60)
    release_lock("leader", "a")
    assert hold_lock("leader", "b", now=now, hold_seconds=60)
    release_lock("leader", "a")  # not a's any more: b keeps it
    assert not hold_lock("leader", "c", now=now, hold_seconds=60)
