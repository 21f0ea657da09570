"""ChEF (paper 004) as lmms-eval recipes: corruptions, recipes, inferencers (the summary of
finished runs is :mod:`lmms_genbench.analysis.chef_summary`).

Importing this package is cheap (numpy and PIL); metrics live in
:mod:`lmms_genbench.metrics.functional.chef`.
"""
