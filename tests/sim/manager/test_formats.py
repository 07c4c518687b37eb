import math

import pytest

from sim.manager.formats import (
    CUM_PROB,
    FORMATS,
    POSITION,
    PROB,
    PROB_ONE,
    REQUEST_ID,
    TOKEN_ID,
    FixedFormat,
    quantize_prob,
)


def test_probability_layout_is_uq1_16():
    assert (PROB.bits, PROB.frac, PROB.signed) == (17, 16, False)
    assert PROB.q_name == "UQ1.16" and PROB_ONE == 65536
    assert CUM_PROB.bits == PROB.bits and CUM_PROB.frac == PROB.frac
    assert PROB.max_raw == 131071 and PROB.min_raw == 0


def test_integer_formats_fit_the_contract():
    assert TOKEN_ID.max_raw >= 128256 - 1 and TOKEN_ID.bits == 17
    assert REQUEST_ID.max_raw + 1 == 128
    assert POSITION.max_raw == 63
    assert all(f.name == name for name, f in FORMATS.items())


@pytest.mark.parametrize("x, raw", [
    (0.0, 0), (1.0, 65536), (0.5, 32768), (0.3, 19661),   # 19660.8 -> 19661
    (1 / 131072, 1),                                       # exactly half an ulp rounds up
    (3 / 131072, 2),                                       # 1.5 ulp rounds up to 2
    (1 / 262144, 0),                                       # a quarter ulp rounds down
    (0.99999, 65535), (0.999999, 65536),                  # 65535.34 / 65535.93
    (1.5, 65536), (-0.25, 0), (math.inf, 65536), (-math.inf, 0),
])
def test_quantize_prob_rounds_half_up_and_clamps(x, raw):
    assert quantize_prob(x) == raw


def test_quantize_prob_rejects_nan():
    with pytest.raises(ValueError, match="NaN"):
        quantize_prob(float("nan"))


def test_signed_format_range_and_rounding():
    q88 = FixedFormat("q88", 16, 8, signed=True)
    assert q88.q_name == "Q8.8" and (q88.min_raw, q88.max_raw) == (-32768, 32767)
    assert q88.from_float(-1.0) == -256 and q88.from_float(1.0) == 256
    assert q88.from_float(1000.0) == 32767 and q88.from_float(-1000.0) == -32768
    assert q88.from_float(-0.5 / 256) == 0                     # -0.5 ulp rounds half up to 0
    assert q88.to_float(-384) == -1.5


def test_check_names_what_and_range():
    with pytest.raises(ValueError, match=r"DraftToken.token: expected an integer in \[0, 131071\]"):
        TOKEN_ID.check(1 << 17, "DraftToken.token")
    with pytest.raises(ValueError):
        TOKEN_ID.check(True, "flag")
    with pytest.raises(ValueError, match="invalid bits"):
        FixedFormat("bad", 4, 5)


def test_acceptance_table_in_the_manager_config():
    """The calibrated stop rule's table: 16 UQ1.16 raws, written and read back by the YAML
    shape (transaction logs carry the config), refused otherwise with the key named."""
    from common.errors import ConfigError
    from sim.manager.config import ManagerConfig

    table = tuple(range(0, 65536, 4096))
    config = ManagerConfig.load().replace(acceptance_table=table)
    assert ManagerConfig.from_dict(config.to_dict()) == config
    assert "acceptance_table" not in ManagerConfig.load().to_dict()["controller"]
    for bad in ((1, 2), table[:-1] + (65537,)):
        with pytest.raises(ConfigError, match=r"controller.acceptance_table \(raw UQ1.16\): expected 16 integers"):
            ManagerConfig.load().replace(acceptance_table=bad)
