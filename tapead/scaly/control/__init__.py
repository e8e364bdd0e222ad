"""The graph API's control flow: loop, branch and custom-call nodes.

``loops`` (``sc.scan``, ``sc.while_loop``), ``branches`` (``sc.cond``,
``sc.print``) and ``custom`` (``sc.custom_derivative``) are what users call
(``tapead.scaly`` exports them), building their nodes with ``nodes``;
``spec`` says what a node computes (``LoopSpec``) and builds the Functions
of derived loops; ``rules`` and ``batched`` are the nodes' derivatives
(reverse, forward, batched forward) with ``checkpoints`` for revolve;
``lowering`` evaluates the nodes on the tape, ``scalar`` runs scalar loop
bodies in C (rewritten as scalar operations by ``scalarize``), ``patterns``
propagates the sparsity of scan outputs.
"""
