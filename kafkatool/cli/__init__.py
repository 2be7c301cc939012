"""The command line: one small module per command; no struct, no offsets, no format constants."""
