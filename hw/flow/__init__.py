"""The RTL flow: block registry, Verilog export and lint, synthesis, simulator runners,
co-verification, `saddle hw`."""
