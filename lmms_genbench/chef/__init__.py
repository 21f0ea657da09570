"""ChEF (paper 004) as lmms-eval recipes: corruptions, recipes, inferencers, summary.

Importing this package is cheap (numpy and PIL); metrics live in
:mod:`lmms_genbench.metrics.functional.chef`.
"""
