"""The SADDLE Manager RTL: one file per block, as sim/manager/ (the model), and the top."""
