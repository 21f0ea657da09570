"""Pure maths and mergeable accumulators: numpy only, no networks, no files."""
