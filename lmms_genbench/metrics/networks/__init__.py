"""Networks that metrics run: a spec (name, module or loader) -> a cached, batched network."""
