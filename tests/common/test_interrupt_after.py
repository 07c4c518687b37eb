"""``common.compiled.interrupt_after``: Ctrl-C inside the block is kept until the block ends
(compiled code aborts when a signal interrupts its int arithmetic), then raised; the previous
SIGINT handler is back afterwards."""
import os
import signal

import pytest

from common.compiled import interrupt_after


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """SIGINT as Python sets it up: a suite started in the background by a non-interactive shell
    inherits it ignored (POSIX), and then Python leaves it so."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_waits_for_the_block_then_is_raised():
    finished = False
    with pytest.raises(KeyboardInterrupt):
        with interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))            # bytecode runs: a raised interrupt would stop here
            finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_stopping_as_ctrl_c_does_waits_too():
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)     # as saddle's CLI sets it
    try:
        finished = False
        with pytest.raises(KeyboardInterrupt):
            with interrupt_after():
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(1000))
                finished = True
        assert finished and signal.getsignal(signal.SIGTERM) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_without_ctrl_c_the_block_returns_normally():
    with interrupt_after():
        value = 1
    assert value == 1 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
