"""Scorers of stored chains: records in, a report out (GenCeption, MCD, MGG)."""
