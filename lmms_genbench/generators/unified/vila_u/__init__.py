"""VILA-U (``unified=vila_u``): the authors' checkpoint layout read natively (:mod:`.model`)."""

from .model import VilaUUnified

__all__ = ["VilaUUnified"]
