"""What the simulator (``sim/``), the trace tools (``traces/``) and the RTL flow (``hw/``) share:
errors the CLI prints as one line, the repository's paths, YAML loading with errors that name
the file and the key, and the progress lines of long commands on stderr. It imports nothing of
theirs, so none of them depends on another through it."""
