"""``kafkatool convert``: segments rewritten at another message format (magic 0, 1, 2) or codec,
offsets kept (spec §13), to a new directory or in place through :mod:`kafkatool.safety`."""
