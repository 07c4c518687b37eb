"""Cost models: GPU roofline, HBM3-PIM timing, links, energy, and whole-step pricing."""
