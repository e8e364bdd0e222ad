"""The graph API's control flow: loop, branch and custom-call nodes.

``api`` is what users call (``sc.scan``, ``sc.while_loop``, ``sc.cond``,
``sc.print``, ``custom.custom_derivative``; ``tapead.scaly`` exports them);
``spec`` says what a node computes (``LoopSpec``) and builds the Functions
of derived loops; ``rules`` and ``batched`` are the nodes' derivatives
(reverse, forward, batched forward) with ``checkpoints`` for revolve;
``lowering`` evaluates the nodes on the tape, ``scalar`` runs scalar loop
bodies in C (rewritten as scalar operations by ``scalarize``), ``patterns``
propagates the sparsity of scan outputs.
"""
