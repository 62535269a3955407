"""dsroc's site as a Flower ClientApp (the ``flower`` extra): a SuperNode relays each message to the hospital's daemon.

:mod:`site_node.flower.client_app` is the ClientApp (``site_node.flower.client_app:app``), :mod:`.relay` what it
does with a message, :mod:`.wire` the records both halves exchange.
"""
