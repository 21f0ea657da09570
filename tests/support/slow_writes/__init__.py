"""Not a package of tests: its folder is put first on PYTHONPATH for sitecustomize.py (slowed store writes)."""
