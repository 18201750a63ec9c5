"""What ``ChronusSettings`` and ``Chronus`` take from a library caller: numbers of numpy's types
as the floats they stand for, and nothing but settings as settings."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from chronus_py.errors import InputError
from chronus_py.policies import Chronus
from chronus_py.selector import ChronusSettings


def test_settings_take_numpy_numbers_as_floats():
    # Before: np.int64(600) was "lease: expected a number", and np.float64 was kept as it came.
    settings = ChronusSettings(lease=np.int64(600), headroom=np.float64(0.5))
    assert type(settings.lease) is float and type(settings.headroom) is float
    assert settings.to_dict()["lease"] == 600.0
    with pytest.raises(ValueError, match=r"lease: expected a number, got Decimal\('600'\)"):
        ChronusSettings(lease=Decimal(600))


def test_chronus_takes_only_settings():
    # Before: Chronus({"lease": 600}) was taken, and the first round failed with an
    # AttributeError deep in the lease selector.
    with pytest.raises(InputError) as caught:
        Chronus({"lease": 600})
    assert str(caught.value) == (
        "Chronus: settings: expected ChronusSettings, got {'lease': 600}: "
        "Chronus(ChronusSettings(...)), or ChronusSettings.from_mapping for a mapping"
    )
    assert isinstance(caught.value, ValueError)
    assert Chronus(None).settings == ChronusSettings()
