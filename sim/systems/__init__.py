"""The simulated systems: GPU-AD/SD, PIM-AD/SD (SpecPIM), SADDLE and its ablations, the 4-GPU
SpecPIM motivation system and the oracle. Each is a YAML file in ``configs/systems/`` read
into a ``SystemSpec``; ``sim.systems.run.simulate`` runs one of them on a workload."""
