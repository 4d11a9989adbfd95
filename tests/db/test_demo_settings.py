"""The demo's password validators, which may read the user table."""

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError


@pytest.mark.django_db
@pytest.mark.parametrize("password", ["alice", "12345678", "password123"])
def test_weak_passwords_are_refused_by_djangos_validators(password):
    with pytest.raises(ValidationError):
        validate_password(password)
