"""Tuning: the simulator's free parameters chosen by running it on the validation split
(``saddle tune-tau``, ``tune-stop``, ``tune-plus``); the choices are written to ``configs/``,
which the simulator reads. Like ``validation/``, this package uses ``sim/`` and is not used by it."""
