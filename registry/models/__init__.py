"""Prediction models: the plugin API (`base`), plugin discovery (`plugins`), storage (`store`) and the built-ins.

Built-in plugins (entry-point group ``nodereg.models``): scaling models ``amdahl``, ``loglog``
(Barnes 2008) and ``downey`` (Deshmeh 2013, ADEPT); projection models ``gbt`` (gradient-boosted
trees) and ``mob`` (Castellanos 2014 model-based trees). ``combine`` joins a scaling model with a
projection to predict a node with more cores than the base node. See docs/models.md.
"""
