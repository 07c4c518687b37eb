"""The RTL flow: block registry, Verilog export and lint, synthesis, simulators, co-verification, `saddle hw`."""
