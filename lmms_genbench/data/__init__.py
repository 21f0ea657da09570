"""Data that tasks read: package photos, image folders, the Semantic Drift joins."""
