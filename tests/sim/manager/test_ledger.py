"""``Ledger.close_all`` (a verified request's tokens closed together) is ``close`` of each."""
import pytest

from sim.manager.conservation import ConservationError, Ledger


def test_close_all_is_close_of_each():
    one, many = Ledger(), Ledger()
    for ledger in (one, many):
        for _ in range(6):
            ledger.open()
    for serial in (1, 2, 4):
        one.close(serial, "accepted")
    many.close_all([1, 2, 4], "accepted")
    many.close_all([], "rejected")
    assert many.totals() == one.totals() and many.check({0, 3, 5}) == one.check({0, 3, 5})


@pytest.mark.parametrize("serials", ([3, 7], [3, 3], [1]))
def test_close_all_refuses_a_token_not_open(serials):
    ledger = Ledger()
    for _ in range(5):
        ledger.open()
    ledger.close(1, "accepted")
    with pytest.raises(ConservationError, match="closed twice or never drafted"):
        ledger.close_all(serials, "accepted")
