"""Tiny random-weight networks and offline assets for smoke runs and tests (one home)."""
