"""The Flower transport's two halves against real TLS daemons, fast: the real ClientApp object answers each message
in this process (an in-process Grid skips only Flower's network hops and process starts; test_flower_app.py runs
the real SuperLink and SuperNodes)."""

from __future__ import annotations

import threading

import grpc
import pytest
from flwr.app import Context, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

from analyst import Federation
from analyst.config import load_federation_file
from analyst.connection import SiteError
from analyst.flower import FlowerConnection, flower_federation, site_nodes
from dsroc.v1 import site_pb2 as pb
from site_node.config import ConfigError
from site_node.flower.client_app import app as client_app
from site_node.flower.relay import NodeSite

from .conftest import node_config
from .test_flower_app import REQUEST, assert_same, statistics


def parse_node_config(text: str) -> dict:
    import tomllib

    return tomllib.loads(text.replace('" ', '"\n'))


class InProcessGrid(Grid):
    """A Grid whose nodes are the dsroc ClientApp called in this process with each node's ``--node-config``."""

    def __init__(self, node_configs: dict[int, dict]):
        self.node_configs, self.replies, self.messages = node_configs, {}, 0
        self._lock = threading.Lock()  # one task at a time: a ClientApp process's identity is process-wide

    def set_run(self, run) -> None:
        pass

    @property
    def run(self):
        raise NotImplementedError

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        return Message(content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id, ttl=ttl)

    def get_node_ids(self):
        return list(self.node_configs)

    def push_messages(self, messages):
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = message.object_id  # what the SuperLink does
            node = message.metadata.dst_node_id
            context = Context(run_id=1, node_id=node, node_config=self.node_configs[node], state=RecordDict(),
                              run_config={})
            with self._lock:
                TaskIdentity.node_id = node  # the ClientApp's task, for this message only
                try:
                    self.replies[message.object_id] = client_app(message=message, context=context)
                finally:
                    TaskIdentity.node_id = 0
                self.messages += 1
            ids.append(message.object_id)
        return ids

    def pull_messages(self, message_ids):
        return [self.replies.pop(i) for i in message_ids if i in self.replies]

    def send_and_receive(self, messages, *, timeout=None):
        return self.pull_messages(self.push_messages(messages))


@pytest.fixture(scope="module")
def grid(sites):
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0  # the ServerApp's task
    yield InProcessGrid({100 + k: parse_node_config(node_config(sites.fed, s)) for k, s in enumerate(sites.sites)})
    TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None


def test_each_node_says_which_site_it_serves(sites, grid):
    assert site_nodes(grid, expect=2, timeout=5) == {"site1": 100, "site2": 101}


def test_a_call_through_flower_gets_the_daemons_reply_and_its_refusals(sites, grid):
    configs, _ = load_federation_file(sites.federation_file)
    with Federation(configs) as direct:
        by_grpc = direct.connections[0].call("Describe", pb.DescribeRequest())
        with pytest.raises(SiteError) as grpc_refusal:
            direct.connections[0].call("Budget", pb.BudgetRequest(dataset="no-such-dataset"))
    conn = FlowerConnection(configs[0], grid, 100, timeout=30)
    assert conn.call("Describe", pb.DescribeRequest()) == by_grpc
    with pytest.raises(SiteError) as flower_refusal:
        conn.call("Budget", pb.BudgetRequest(dataset="no-such-dataset"))
    assert (flower_refusal.value.code, flower_refusal.value.message) == (grpc_refusal.value.code,
                                                                         grpc_refusal.value.message)
    wrong_token = FlowerConnection(configs[0].__class__(**{**configs[0].__dict__, "token": "not-a-token"}), grid, 100)
    with pytest.raises(SiteError) as unauthenticated:
        wrong_token.call("Describe", pb.DescribeRequest())
    assert unauthenticated.value.code == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(SiteError) as streaming:
        conn.call("ReleaseNoisyScores", pb.ReleaseRequest(), stream=True)
    assert streaming.value.code == grpc.StatusCode.UNIMPLEMENTED


def test_the_node_config_is_checked_before_anything_is_asked(sites):
    good = parse_node_config(node_config(sites.fed, "site1"))
    assert NodeSite.from_node_config(good).name == "site1"
    with pytest.raises(ConfigError, match="unknown key"):
        NodeSite.from_node_config({**good, "ledger": "/tmp/elsewhere.sqlite"})
    with pytest.raises(ConfigError, match="site-config"):
        NodeSite.from_node_config({k: v for k, v in good.items() if k != "site-config"})
    with pytest.raises(ConfigError, match="client-cert and client-key"):
        NodeSite.from_node_config({k: v for k, v in good.items() if k != "client-key"})


def test_a_validation_over_the_flower_transport_equals_the_daemons_replay(sites, grid):
    configs, _ = load_federation_file(sites.federation_file)
    with flower_federation(grid, configs, timeout=60) as fed:
        through_flower = fed.validate(**REQUEST).to_dict()
    with Federation(configs) as fed:
        through_daemons = fed.validate(**REQUEST).to_dict()
    assert all(not r["repeated"] for r in through_flower["privacy"].values())
    assert all(r["repeated"] for r in through_daemons["privacy"].values())
    assert_same(statistics(through_flower), statistics(through_daemons))


def test_a_request_beyond_the_policy_is_refused_as_by_the_daemons_and_charges_nothing(sites, grid):
    configs, _ = load_federation_file(sites.federation_file)
    too_much = {**REQUEST, "epsilon": 1000.0}
    with Federation(configs) as fed:
        before = {s: (b["epsilon_spent"], b["releases"]) for s, b in fed.budget(REQUEST["dataset"]).items()}
        with pytest.raises(SiteError) as by_daemons:
            fed.validate(**too_much)
    with flower_federation(grid, configs, timeout=60) as fed:
        with pytest.raises(SiteError) as by_flower:
            fed.validate(**too_much)
    assert (by_flower.value.code, by_flower.value.message) == (by_daemons.value.code, by_daemons.value.message)
    assert by_flower.value.code == grpc.StatusCode.PERMISSION_DENIED and "policy: epsilon" in by_flower.value.message
    with Federation(configs) as fed:
        after = {s: (b["epsilon_spent"], b["releases"]) for s, b in fed.budget(REQUEST["dataset"]).items()}
    assert after == before
