"""Unit tests: no server, no network (pure functions, parsers, models on CPU); `make test-unit` runs them."""
