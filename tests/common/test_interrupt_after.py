"""``common.compiled.interrupt_after``: Ctrl-C inside the block is kept until the block ends
(compiled code aborts when a signal interrupts its int arithmetic), then raised; the previous
SIGINT handler is back afterwards."""
import os
import signal

import pytest

from common.compiled import interrupt_after


def test_ctrl_c_waits_for_the_block_then_is_raised():
    finished = False
    with pytest.raises(KeyboardInterrupt):
        with interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))            # bytecode runs: a raised interrupt would stop here
            finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_ctrl_c_the_block_returns_normally():
    with interrupt_after():
        value = 1
    assert value == 1 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
