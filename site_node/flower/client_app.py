"""The ClientApp a hospital's SuperNode runs: ``site_node.flower.client_app:app``.

It reads only what the SuperNode's operator set (``--node-config``, see :class:`site_node.flower.relay.NodeSite`);
nothing in the message can point it at another daemon, dataset or ledger.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from .relay import NodeSite, relay
from .wire import RECORD

__all__ = ["app"]

app = ClientApp()


@app.query("dsroc")
def call(message: Message, context: Context) -> Message:
    """One ``dsroc.v1.SiteService`` call, answered by the hospital's daemon (or its refusal, as a status)."""
    record = message.content[RECORD]
    out = relay(NodeSite.from_node_config(context.node_config), str(record["method"]), record["request"],
                str(record["token"]))
    return Message(RecordDict({RECORD: ConfigRecord({"code": out.code, "details": out.details, "reply": out.payload})}),
                   reply_to=message)


@app.query("site")
def name(message: Message, context: Context) -> Message:
    """The site's name (from its config), so that the analyst knows which node is which site."""
    site = NodeSite.from_node_config(context.node_config)
    return Message(RecordDict({RECORD: ConfigRecord({"site": site.name})}), reply_to=message)
