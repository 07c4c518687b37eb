"""Shared helpers of the Manager-model tests."""
from sim.manager import Manager, ManagerConfig
from sim.manager.transactions import Admit, DraftToken


def config(**changes) -> ManagerConfig:
    """A small Manager (4 micro-batches, tau 0) unless overridden."""
    base = dict(max_requests=16, max_draft_len=8, tau=0, shared_entries=8, eager_entries=8,
                micro_batches=4, dlm_fc_threshold=10, tlm_attention_threshold=10)
    base.update(changes)
    return ManagerConfig(**base)


def manager(**changes) -> Manager:
    return Manager(config(**changes))


def admit(m: Manager, *pairs) -> None:
    for request, mb in pairs:
        m.apply(Admit(request, mb))


def draft(m: Manager, request: int, *probs: int, token: int = 7) -> list:
    """Draft consecutive tokens for ``request`` at its next positions; all events."""
    events = []
    slot = m.controller.slots[request]
    for p in probs:
        events += m.apply(DraftToken(request, slot.microbatch, slot.t + 1, token, p))
    return events


def of(events, cls) -> list:
    return [e for e in events if isinstance(e, cls)]
