"""The limiter on every kind of redis-py connection, keeping its timeout:
TCP, a Unix socket, TLS, Sentinel's `master_for` (a real Sentinel,
`redis-server --sentinel`, watching a master with the module), with a
failover under load: decisions go on, and nothing is charged twice. A
server stopped with SIGSTOP shows the timeout is the limiter's: the
user's clients here have none (they would wait forever)."""

import asyncio
import os
import signal
import subprocess
import tempfile
import threading
import time

import pytest
import redis
import redis.asyncio
import redis.asyncio.sentinel
from redis.sentinel import Sentinel

from slidewin import FALLBACK, REDIS, AsyncLimiter, Limiter
from conftest import SERVERS, Server, count_sends, entries, free_port, server_binary
from test_errors import eventually, raw, within

SENTINEL_SERVER = "redis-7.0"  # Debian's redis-server: it runs as a Sentinel too


def role(srv):
    """The server's replication role; None while it drops its connections
    (Valkey resets them when it becomes a replica)."""
    try:
        return raw(srv).info("replication")["role"]
    except redis.exceptions.ConnectionError:
        return None


def hung_answers(lim, srv, key="hung"):
    """With `srv` stopped, a check is answered by the outage policy within
    seconds (the limiter's timeout), not never."""
    os.kill(srv.proc.pid, signal.SIGSTOP)
    try:
        d = within(10, lambda: lim.check(key, 5, 60_000))
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    assert (d.allowed, d.source) == (False, FALLBACK), d
    assert lim.stats()["decisions"]["fallback"]["timeout"] == 1


def test_a_unix_socket(server):
    path = os.path.join(tempfile.mkdtemp(prefix="slidewin-sock-"), "redis.sock")
    srv = Server(server.name, args=["--unixsocket", path, "--unixsocketperm", "700"])
    try:
        client = redis.Redis(unix_socket_path=path)  # no timeout of its own
        lim = Limiter(client, timeout_ms=300)
        d = lim.check("unix", 2, 60_000)
        assert d.allowed and d.source == REDIS
        assert entries(srv.client(), "unix") == 1
        # The limiter's connection is a Unix socket: the server lists it so.
        clients = raw(srv).client_list()
        assert any(path in c.get("addr", "") + c.get("laddr", "") for c in clients), clients
        hung_answers(lim, srv)
    finally:
        srv.close()


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 (openssl)."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=slidewin test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(directory, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt",
        "-days", "2", "-extfile", "ext.cnf")
    return {n: os.path.join(directory, n) for n in ("ca.crt", "server.crt", "server.key")}


def test_tls_settings():
    # Debian's redis-server is built with TLS.
    certs = make_certificates(tempfile.mkdtemp(prefix="slidewin-tls-"))
    tls_port = free_port()
    srv = Server(SENTINEL_SERVER, args=["--tls-port", str(tls_port), "--tls-cert-file", certs["server.crt"],
                                        "--tls-key-file", certs["server.key"], "--tls-ca-cert-file", certs["ca.crt"],
                                        "--tls-auth-clients", "no"])
    try:
        client = redis.Redis(host="127.0.0.1", port=tls_port, ssl=True, ssl_ca_certs=certs["ca.crt"])  # no timeout of its own
        lim = Limiter(client, timeout_ms=300)
        assert lim.check("tls", 2, 60_000).source == REDIS
        assert entries(srv.client(), "tls") == 1
        # The TLS port speaks nothing else: the limiter really used TLS.
        with pytest.raises(redis.exceptions.ConnectionError):
            redis.Redis(port=tls_port, socket_timeout=2, retry=None).ping()
        hung_answers(lim, srv)

        async def run():
            alim = AsyncLimiter(redis.asyncio.Redis(host="127.0.0.1", port=tls_port, ssl=True, ssl_ca_certs=certs["ca.crt"]),
                                timeout_ms=2000)  # a TLS handshake on a loaded machine
            d = await alim.check("tls", 2, 60_000)
            await alim.aclose()
            return d
        d = asyncio.run(run())
        assert (d.allowed, d.remaining, d.source) == (True, 0, REDIS), d
    finally:
        srv.close()


class SentinelSet:
    """A master and a replica with the module, watched by one Sentinel
    (quorum 1) under the name `mymaster`."""

    def __init__(self, name: str):
        self.master = Server(name)
        self.replica = Server(name)
        raw(self.replica).replicaof("127.0.0.1", self.master.port)
        eventually("the replica is in sync", lambda: raw(self.replica).info("replication").get("master_link_status") == "up")
        self.dir = tempfile.mkdtemp(prefix="slidewin-sentinel-")
        self.port = free_port()
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile sentinel.log\n"
                    f"sentinel monitor mymaster 127.0.0.1 {self.master.port} 1\n"
                    "sentinel down-after-milliseconds mymaster 2000\n"
                    "sentinel failover-timeout mymaster 20000\n")
        self.proc = subprocess.Popen([server_binary(SENTINEL_SERVER), conf, "--sentinel"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.sentinel = Sentinel([("127.0.0.1", self.port)], socket_timeout=2)
        eventually("the Sentinel knows the replica", self._ready, deadline_s=30)

    def _ready(self):
        try:
            replicas = self.sentinel.discover_slaves("mymaster")
        except redis.exceptions.RedisError:
            return False
        return ("127.0.0.1", self.replica.port) in replicas

    def master_port(self) -> int:
        return self.sentinel.discover_master("mymaster")[1]

    def failover(self) -> None:
        redis.Redis(port=self.port, socket_timeout=5).execute_command("SENTINEL", "FAILOVER", "mymaster")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.master.close()
        self.replica.close()


@pytest.fixture(params=SERVERS)
def sentinel_set(request):
    s = SentinelSet(request.param)
    yield s
    s.close()


def test_sentinel_master_for_keeps_the_timeout(sentinel_set):
    s = sentinel_set
    client = s.sentinel.master_for("mymaster")  # its connections have no timeout of their own
    lim = Limiter(client, timeout_ms=300)
    d = lim.check("sent", 2, 60_000)
    assert (d.allowed, d.source) == (True, REDIS)
    assert entries(s.master.client(), "sent") == 1
    hung_answers(lim, s.master)

    async def run():
        sentinel = redis.asyncio.sentinel.Sentinel([("127.0.0.1", s.port)], socket_timeout=2)
        alim = AsyncLimiter(sentinel.master_for("mymaster"), timeout_ms=300)
        d = await alim.check("sent", 2, 60_000)
        await alim.aclose()
        return d
    d = asyncio.run(run())
    assert (d.allowed, d.remaining, d.source) == (True, 0, REDIS), d


def test_a_sentinel_failover_under_load_charges_nothing_twice(sentinel_set):
    s = sentinel_set
    old_master, old_replica = s.master, s.replica
    lim = Limiter(s.sentinel.master_for("mymaster"), timeout_ms=500, breaker_pause_ms=100)
    sends = count_sends(lim)
    decisions, errors = [], []
    stop = threading.Event()

    def load():
        while not stop.is_set():
            try:
                decisions.append(lim.check("load", 100_000, 3_600_000))
            except Exception as e:  # a decision not made: the test fails below
                errors.append(e)
            time.sleep(0.002)

    t = threading.Thread(target=load)
    t.start()
    try:
        eventually("decisions under load", lambda: len(decisions) > 50)
        before = len(decisions)
        s.failover()
        eventually("Sentinel names the new master", lambda: s.master_port() == old_replica.port, deadline_s=30)
        eventually("the new master decides", lambda: len(decisions) > before and decisions[-1].source == REDIS
                   and role(old_replica) == "master"
                   and any(x.source == REDIS for x in decisions[before:]) and len(decisions) > before + 50, deadline_s=30)
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(timeout=30)
    assert not errors, errors[:3]
    checks = sends.count("SLIDEWIN.CHECK")
    ran = old_master.calls("slidewin.check") + old_replica.calls("slidewin.check")
    allowed = [x for x in decisions if x.source == REDIS and x.allowed]
    unknown = lim.stats()["decisions"].get("fallback", {})
    held = entries(raw(old_replica), "load")
    print(f"\n{old_master.name}: {len(decisions)} decisions, {len(allowed)} allowed by Redis, fallbacks {unknown}, "
          f"{checks} CHECKs sent, {ran} run by the servers, {held} entries on the new master")
    # Each CHECK the limiter sent ran at most once: no send was repeated
    # by anyone (a READONLY refusal, sent again, is not a run).
    assert ran <= checks, (ran, checks)
    # The new master holds no more entries than calls that may have charged:
    # those Redis allowed, and those whose reply was lost (timeout, connection).
    maybe = unknown.get("timeout", 0) + unknown.get("connection", 0)
    assert held <= len(allowed) + maybe, (held, len(allowed), maybe)
    # Decisions went on through the failover, and Redis decides again.
    assert decisions[-1].source == REDIS
    # Once Sentinel has made the old master a replica, a connection still
    # open to it gets READONLY (redis-py's Sentinel connection raises it as
    # "The previous master is now a slave"): the limiter reconnects, asks
    # Sentinel, and the new master decides.
    eventually("the old master is a replica", lambda: role(old_master) == "slave", deadline_s=30)
    d = lim.check("after", 5, 60_000)
    assert (d.allowed, d.source) == (True, REDIS), (d, lim.stats())
    assert entries(raw(old_replica), "after") == 1
