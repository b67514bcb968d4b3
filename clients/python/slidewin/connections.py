"""The limiter's own connections to Redis, made from the client it is given.

A limiter never sends through the client's `execute_command`: redis-py
re-sends a command after a timeout or a lost connection (its default
`retry`, and `RedisCluster`'s own retries), and a CHECK the server already
ran would then be charged twice. Nor does it rebuild the client's pool (a
Sentinel pool, a blocking pool, a pool of the caller's own class cannot be
made again from its settings). Instead it keeps a few connections of its
own, each made by the client's *connection class* with the client's
*connection settings* (host and port, a Unix socket path, TLS files,
password, Sentinel's master discovery, a cluster node's address), plus the
limiter's timeout (`timeout_ms`: connect and reply) and no retry. Each
command is sent once on one of them; whatever goes wrong, the connection is
closed and the error goes to the limiter, which decides (see
`Policy.after_error`): it never sends a charging command a second time
unless the server refused the first one (READONLY, TRYAGAIN, MOVED, ASK:
nothing ran).

On a cluster, the command goes to the primary of the key's slot; a MOVED
reply refreshes the client's slot table and the command goes to the new
owner, an ASK reply sends it once to the importing node after ASKING.
"""

import os
import threading
from typing import Any, Dict, List, Optional, Sequence

import redis
import redis.asyncio
from redis.backoff import NoBackoff

#: Redirections followed for one command (MOVED or ASK: not run where refused).
MAX_REDIRECTS = 5


def _settings(connection_kwargs: Dict[str, Any], timeout_ms: Optional[int], retry) -> Dict[str, Any]:
    """The client's connection settings with the limiter's timeout and no retry."""
    kwargs = dict(connection_kwargs)
    if timeout_ms is not None:
        kwargs["socket_timeout"] = kwargs["socket_connect_timeout"] = timeout_ms / 1000
    kwargs["retry"] = retry
    return kwargs


class _Idle:
    """Idle connections of one address, at most `size`; dropped after a fork."""

    def __init__(self, make, size: int):
        self._make = make
        self._size = max(1, size)
        self._idle: List[Any] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def take(self):
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        return self._make()

    def keep(self, conn) -> bool:
        """Keeps `conn` for the next command; False when it must be closed."""
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < self._size:
                self._idle.append(conn)
                return True
        return False

    def drain(self) -> List[Any]:
        with self._lock:
            idle, self._idle = self._idle, []
        return idle


def _quietly(fn) -> None:
    try:
        fn()
    except Exception:  # closing a broken socket: nothing to report
        pass


def _fresh(conn) -> None:
    """An idle connection the server closed meanwhile (a restart, a master
    made a replica, an idle timeout) is opened again before anything is
    sent on it, as redis-py's pools do: nothing was sent, nothing is lost."""
    try:
        stale = conn.can_read(timeout=0)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        stale = True
    if stale:
        conn.disconnect()
        conn.connect()


async def _afresh(conn) -> None:
    """`_fresh` for asyncio connections."""
    # can_read (redis-py 8), else its older name can_read_destructive.
    can_read = getattr(conn, "can_read", None) or conn.can_read_destructive
    try:
        stale = await can_read()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        stale = True
    if stale:
        await conn.disconnect()
        await conn.connect()


class Link:
    """Sends one command, once, on a connection of the limiter's own
    (sync clients: `redis.Redis` on any pool, `redis.cluster.RedisCluster`)."""

    def __init__(self, client, timeout_ms: Optional[int]):
        if isinstance(client, redis.asyncio.Redis) or isinstance(client, redis.asyncio.cluster.RedisCluster):
            raise TypeError("an asyncio client: use AsyncLimiter")
        self.client = client
        self.timeout_ms = timeout_ms
        self.cluster = isinstance(client, redis.cluster.RedisCluster)
        self._idle: Dict[str, _Idle] = {}
        self._lock = threading.Lock()
        self._stale_topology = False
        if not self.cluster and getattr(client, "connection_pool", None) is None:
            raise TypeError(f"slidewin needs a redis-py client (redis.Redis or redis.cluster.RedisCluster), got {type(client).__name__}")

    # -- where the connections come from ----------------------------------

    def _pool_of(self, node) -> Any:
        if node is None:
            return self.client.connection_pool
        return self.client.get_redis_connection(node).connection_pool

    def _idle_for(self, node) -> _Idle:
        name = "" if node is None else node.name
        with self._lock:
            idle = self._idle.get(name)
            if idle is None:
                pool = self._pool_of(node)
                kwargs = _settings(pool.connection_kwargs, self.timeout_ms, redis.retry.Retry(NoBackoff(), 0))
                cls = pool.connection_class
                idle = self._idle[name] = _Idle(lambda: cls(**kwargs), getattr(pool, "max_connections", 0) or 50)
        return idle

    def _node(self, key):
        if not self.cluster:
            return None
        if self._stale_topology:
            self._stale_topology = False
            self.client.nodes_manager.initialize()
        return self.client.get_node_from_key(key)

    # -- one command --------------------------------------------------------

    def _once(self, node, args: Sequence, asking: bool = False):
        idle = self._idle_for(node)
        conn = idle.take()
        try:
            # connect() first: a Sentinel connection asks for the master
            # there (sending alone would connect to its default address).
            conn.connect()
            _fresh(conn)
            if asking:
                conn.send_command("ASKING")
                conn.read_response()
            conn.send_command(*args)
            reply = conn.read_response()
        except BaseException as e:
            _quietly(conn.disconnect)
            if self.cluster and isinstance(e, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
                self._stale_topology = True  # ask the cluster where the slots are before the next call
            raise
        if not idle.keep(conn):
            _quietly(conn.disconnect)
        return reply

    def execute(self, key, args: Sequence):
        """Sends `args` once to the node of `key` (any node but the one a
        cluster says owns it is never sent it twice: MOVED and ASK are
        refusals)."""
        node = self._node(key)
        asking = False
        for _ in range(MAX_REDIRECTS):
            try:
                return self._once(node, args, asking)
            except redis.exceptions.AskError as e:
                if not self.cluster:
                    raise
                moved = isinstance(e, redis.exceptions.MovedError)
                if moved:
                    self.client.nodes_manager.initialize()
                    node = self.client.get_node_from_key(key)
                else:
                    node = self.client.get_node(host=e.host, port=e.port) or self._new_node(e.host, e.port)
                asking = not moved
        raise redis.exceptions.ClusterError("slidewin: too many cluster redirections")

    def _new_node(self, host, port):
        self.client.nodes_manager.initialize()
        node = self.client.get_node(host=host, port=port)
        if node is None:
            raise redis.exceptions.ClusterError(f"slidewin: no node {host}:{port} in the cluster's table")
        return node

    def on_every_primary(self, args: Sequence) -> None:
        """Sends `args` to every primary (a cluster) or the one server."""
        if not self.cluster:
            self._once(None, args)
            return
        for node in self.client.get_primaries():
            self._once(node, args)

    def reconnect(self) -> None:
        """Closes the idle connections: the next command connects afresh
        (and resolves the host name, or asks Sentinel for the master, again)."""
        with self._lock:
            idles = list(self._idle.values())
        for idle in idles:
            for conn in idle.drain():
                _quietly(conn.disconnect)
        if self.cluster:
            self._stale_topology = True

    close = reconnect


class AsyncLink:
    """`Link` for `redis.asyncio.Redis` and `redis.asyncio.RedisCluster`."""

    def __init__(self, client, timeout_ms: Optional[int]):
        self.client = client
        self.timeout_ms = timeout_ms
        self.cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        if not self.cluster and not isinstance(getattr(client, "connection_pool", None), redis.asyncio.ConnectionPool):
            raise TypeError(f"AsyncLimiter needs a redis.asyncio client, got {type(client).__name__}")
        self._idle: Dict[str, _Idle] = {}
        self._stale_topology = False

    def _idle_for(self, node) -> _Idle:
        name = "" if node is None else node.name
        idle = self._idle.get(name)
        if idle is None:
            if node is None:
                pool = self.client.connection_pool
                cls, base, size = pool.connection_class, pool.connection_kwargs, pool.max_connections
            else:
                cls, base, size = node.connection_class, dict(node.connection_kwargs), node.max_connections
            kwargs = _settings(base, self.timeout_ms, redis.asyncio.retry.Retry(NoBackoff(), 0))
            idle = self._idle[name] = _Idle(lambda: cls(**kwargs), size or 50)
        return idle

    async def _node(self, key):
        if not self.cluster:
            return None
        if self._stale_topology:
            self._stale_topology = False
            await self.client.nodes_manager.initialize()
        else:
            await self.client.initialize()  # once: a no-op afterwards
        return self.client.get_node_from_key(key)

    async def _once(self, node, args: Sequence, asking: bool = False):
        idle = self._idle_for(node)
        conn = idle.take()
        try:
            await conn.connect()  # as in Link._once
            await _afresh(conn)
            if asking:
                await conn.send_command("ASKING")
                await conn.read_response()
            await conn.send_command(*args)
            reply = await conn.read_response()
        except BaseException as e:
            try:
                await conn.disconnect()
            except Exception:
                pass
            if self.cluster and isinstance(e, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
                self._stale_topology = True
            raise
        if not idle.keep(conn):
            await conn.disconnect()
        return reply

    async def execute(self, key, args: Sequence):
        node = await self._node(key)
        asking = False
        for _ in range(MAX_REDIRECTS):
            try:
                return await self._once(node, args, asking)
            except redis.exceptions.AskError as e:
                if not self.cluster:
                    raise
                moved = isinstance(e, redis.exceptions.MovedError)
                if moved:
                    await self.client.nodes_manager.initialize()
                    node = self.client.get_node_from_key(key)
                else:
                    node = self.client.get_node(host=e.host, port=e.port)
                    if node is None:
                        await self.client.nodes_manager.initialize()
                        node = self.client.get_node(host=e.host, port=e.port)
                    if node is None:
                        raise redis.exceptions.ClusterError(f"slidewin: no node {e.host}:{e.port} in the cluster's table")
                asking = not moved
        raise redis.exceptions.ClusterError("slidewin: too many cluster redirections")

    async def on_every_primary(self, args: Sequence) -> None:
        if not self.cluster:
            await self._once(None, args)
            return
        await self.client.initialize()
        for node in self.client.get_primaries():
            await self._once(node, args)

    async def reconnect(self) -> None:
        for idle in list(self._idle.values()):
            for conn in idle.drain():
                try:
                    await conn.disconnect()
                except Exception:
                    pass
        if self.cluster:
            self._stale_topology = True

    close = reconnect


__all__ = ["Link", "AsyncLink", "MAX_REDIRECTS"]
