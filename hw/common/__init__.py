"""Shared RTL helpers: priority encoders, a lint-clean padded read mux."""
