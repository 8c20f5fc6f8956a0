"""Settings by environment: base (shared), dev, test, production."""
