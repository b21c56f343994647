"""Flows apply the core's decisions: load facts, ask ``app.core``, apply the answer through
adapters and the store. Grouped by capability into packages whose imports point one way
(pyproject's ``flow-packages`` contract, highest first): ``ingest`` -> ``nightly`` |
``commands`` -> ``tracking`` | ``results`` | ``scheduler`` -> ``sweeps`` -> ``repo``.
A package's surface is its named submodules: callers import ``app.flows.<package>.<module>``;
a package's ``__init__`` re-exports nothing."""
