"""Errors that reach the user as one clear line (the CLI prints them without a traceback)."""


class SaddleError(Exception):
    """Base of every error the CLI reports as ``saddle: error: <message>``."""


class ConfigError(SaddleError, ValueError):
    """A configuration file or value is wrong; the message names the file and the key."""
