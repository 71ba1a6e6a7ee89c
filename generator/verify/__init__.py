"""Verification: checks that use both the analyzer and the generator (the layer above both).

* :mod:`~chat_autoparser.generator.verify.fixed_point`: render → parse fixed point and reconstructability
  (oracle 2);
* :mod:`~chat_autoparser.generator.verify.deviations`: generic perturbations of rendered outputs that must
  parse to the same message (oracle 5);
* :mod:`~chat_autoparser.generator.verify.gbnf_check`: our strict GBNF checker (llama.cpp's grammar rules);
* :mod:`~chat_autoparser.generator.verify.engines`: real grammar engines (llguidance, llama.cpp) as checkers.

Nothing in :mod:`analyzer` or the rest of :mod:`generator` imports this package.
"""
