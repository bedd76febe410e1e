"""A Spark job's service on the driver: key handles for the executors, and the counters they report back.

Spark has no actors, so the job's shared state lives in a small network service the driver hosts
for the job (``JobService``), reached by the executors' Python workers through a ``ServiceLink``:
the driver's address and a per-job token. The token authenticates every connection (an HMAC
challenge, ``multiprocessing.connection``), so the link is all a task closure carries: no key,
no cache URL's password, nothing secret in the plan, the Spark conf or a closure. What it serves:

- ``env()``: the secret channel's environment (``providers.secrets.worker_env``) for a worker;
- ``report(source, snapshots)``: a worker's spending counters (cumulative per worker);
- ``rows(key, delta)``: the row counters of one finished partition of one stage (a partition that
  Spark runs again, after a failure or speculatively, replaces its first count);
- ``lease(...)``: the job's ONE budget per endpoint+model: the Ray runner's coordinator logic
  (``ray_limits.LimitsActor``: RPM/TPM, the 429 pause, the in-flight bound, the breaker) on an event
  loop of the driver; executors lease from it in chunks (``spark_limits``).

A service that cannot be reached within ``CALL_TIMEOUT_S`` stops the task with one
``ServiceError``, never a hang.

Example:
    >>> with JobService({"INFERFRAME_SECRET_k1": "sk-x"}) as service:
    ...     link = service.link()
    ...     env = link.call("env")
    ...     link.call("rows", "stage-0:part-0", {"prompt": {"rows_done": 2}})
    ...     rows = service.row_counts()
    >>> env, rows
    ({'INFERFRAME_SECRET_k1': 'sk-x'}, [{'label': 'prompt', 'rows_done': 2}])
"""

from __future__ import annotations

import asyncio
import secrets as _token
import socket
import struct
import threading
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any, Callable

from inferframe.errors import ServiceError

CALL_TIMEOUT_S = 30.0
ALIVE_CHECK_S = 1.0  # how often the accept loop asks ``alive()`` whether the service is still wanted


class JobService:
    """The driver's per-job service (see the module's docstring); a context manager that stops it.

    Parameters:
        env: the environment a worker gets (the secret channel): a dict, or a function that gives it at each
            call (keys registered after the service started reach the workers too); None: none.
        host: the address to listen on (the Spark driver's host); None: this machine's loopback.
        alive: asked every ``ALIVE_CHECK_S`` seconds; once it says False the service closes itself (a session's
            service ends with its SparkContext). None: until ``close()``.
        name: the prefix of its threads' names.
    """

    def __init__(self, env: dict | Callable[[], dict] | None = None, host: str | None = None,
                 alive: Callable[[], bool] | None = None, name: str = "inferframe-spark-service") -> None:
        self._env = env if callable(env) else dict(env or {})
        self._token = _token.token_bytes(32)
        self._socket = socket.create_server((host or "127.0.0.1", 0))
        self._socket.settimeout(ALIVE_CHECK_S)
        self.address = self._socket.getsockname()[:2]
        self._alive, self._name = alive, name
        self._lock = threading.Lock()
        self._reports: dict[str, list[dict]] = {}
        self._rows: dict[str, dict] = {}
        self._open = True
        self._conns: set = set()  # open connections: shut at close(), so their threads end with the service
        self._limits = None  # the job's LimitsActor and its event loop, made at the first lease
        self._budgets = None  # the job's budget grants (max_cost/max_tokens_budget), made at the first grant
        # Called with (service, key) after each report or row count, on the connection's thread.
        self.on_change: Callable[["JobService", str], None] | None = None
        self.job_id: str | None = None  # a session service's job (runners.spark_jobs.session_job)
        threading.Thread(target=self._accept, name=name, daemon=True).start()

    @property
    def open(self) -> bool:
        return self._open

    def link(self) -> "ServiceLink":
        """What a task closure carries to reach this service: its address and the job's token."""
        return ServiceLink(self.address, self._token)

    # --- the methods workers call ---------------------------------------------------------------
    def env(self) -> dict:
        return dict(self._env() if callable(self._env) else self._env)

    def report(self, source: str, snapshots: list[dict]) -> None:
        with self._lock:
            self._reports[source] = list(snapshots)
        self._changed(source)

    def rows(self, key: str, delta: dict) -> None:
        with self._lock:
            self._rows[key] = delta  # a partition run again replaces its first count
        self._changed(key)

    def _changed(self, key: str) -> None:
        if self.on_change is not None:
            self.on_change(self, key)

    def lease(self, *args) -> dict:
        """``LimitsActor.lease`` on the service's event loop (one loop: the actor's state is one asyncio world)."""
        if self._limits is None:
            with self._lock:
                if self._limits is None:
                    from inferframe.runners.ray_limits.actor import LimitsActor

                    loop = asyncio.new_event_loop()
                    threading.Thread(target=loop.run_forever, name=f"{self._name}-limits", daemon=True).start()
                    self._limits = (LimitsActor(), loop)
        actor, loop = self._limits
        return asyncio.run_coroutine_threadsafe(actor.lease(*args), loop).result()

    def grant_budget(self, *args) -> list:
        """``LimitsActor.grant_budget``: one ledger of every executor's budget grants (``ray_limits.budget_grants``)."""
        with self._lock:
            if self._budgets is None:
                from inferframe.runners.ray_limits.budget_grants import BudgetLedger

                self._budgets = BudgetLedger()
            return self._budgets.grant(*args)

    _METHODS = ("env", "report", "rows", "lease", "grant_budget")

    # --- what the driver reads ------------------------------------------------------------------
    def counter_reports(self, prefix: str = "") -> dict[str, list[dict]]:
        """The workers' latest spending, by source (``prefix``: only the sources that start with it)."""
        with self._lock:
            return {k: v for k, v in self._reports.items() if k.startswith(prefix)}

    def limits_state(self) -> dict:
        """What the service's coordinator knows per key (``LimitsActor.describe``; {} before the first lease)."""
        if self._limits is None:
            return {}
        actor, loop = self._limits

        async def describe() -> dict:  # on the actor's loop: its state is read between two of its steps
            return actor.describe()["keys"]

        return asyncio.run_coroutine_threadsafe(describe(), loop).result()

    def row_counts(self, prefix: str = "") -> list[dict]:
        """Row counters per call label, summed over the finished partitions (whose keys start with ``prefix``)."""
        out: dict[str, dict] = {}
        with self._lock:
            parts = [v for k, v in self._rows.items() if k.startswith(prefix)]
        for part in parts:
            for label, fields in part.items():
                total = out.setdefault(label, {"label": label})
                for k, v in fields.items():
                    total[k] = total.get(k, 0) + v
        return list(out.values())

    # --- serving --------------------------------------------------------------------------------
    def _accept(self) -> None:
        while self._open:
            if self._alive is not None and not self._alive():
                self.close()
                return
            try:
                sock, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(sock,), name=f"{self._name}-conn", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        # A caller that never completes the handshake does not hold the thread (a receive timeout on the
        # blocking socket: multiprocessing's Connection reads the descriptor itself).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", int(CALL_TIMEOUT_S), 0))
        _no_delay(sock)
        conn = Connection(sock.detach())
        try:
            deliver_challenge(conn, self._token)
            answer_challenge(conn, self._token)
        except Exception:  # a caller without the token, or a silent one
            conn.close()
            return
        _on_socket(conn, lambda s: s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0)))
        with self._lock:  # calls may be minutes apart: no timeout from here on
            if not self._open:
                conn.close()
                return
            self._conns.add(conn)
        with conn:
            while True:
                try:
                    method, args = conn.recv()
                except (EOFError, OSError):
                    with self._lock:
                        self._conns.discard(conn)
                    return
                if method not in self._METHODS:
                    conn.send(("error", f"no method {method!r}"))
                    continue
                try:
                    conn.send(("ok", getattr(self, method)(*args)))
                except Exception as e:  # the worker gets the reason; the service goes on
                    conn.send(("error", f"{type(e).__name__}: {e}"))

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        self._socket.close()  # the accept loop sees it within ALIVE_CHECK_S
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:  # wakes the thread waiting on it: it sees the end of the stream
            _on_socket(conn, lambda s: s.shutdown(socket.SHUT_RDWR))
        if self._limits is not None:
            loop = self._limits[1]
            loop.call_soon_threadsafe(loop.stop)

    def __enter__(self) -> "JobService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _no_delay(sock: socket.socket) -> None:
    # The handshake and each call are small messages sent back to back: with Nagle's algorithm the second waited for
    # the peer's delayed ACK, 40 ms a new connection (each Python worker's first call of each job).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _on_socket(conn: Connection, action: Callable[[socket.socket], Any]) -> None:
    """``action`` on the socket under ``conn`` (borrowed: the connection keeps its descriptor)."""
    try:
        view = socket.socket(fileno=conn.fileno())
    except OSError:  # already closed
        return
    try:
        action(view)
    except OSError:
        pass
    finally:
        view.detach()


class ServiceLink:
    """A worker's connection to the job's service: picklable as (address, token), connected on first use.

    Parameters:
        address: the service's (host, port).
        token: the job's token (authenticates the connection; never sent itself).
        timeout_s: the bound on connecting and on each answer.
    """

    def __init__(self, address: tuple[str, int], token: bytes, timeout_s: float = CALL_TIMEOUT_S) -> None:
        self.address, self.token, self.timeout_s = tuple(address), token, timeout_s
        self._free: list = []  # open connections not in use: concurrent calls (leases, reports) each take one
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"address": self.address, "token": self.token, "timeout_s": self.timeout_s}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["address"], state["token"], state["timeout_s"])

    def __repr__(self) -> str:  # never the token
        return f"ServiceLink({self.address[0]}:{self.address[1]})"

    def unreachable(self, why: str) -> ServiceError:
        return ServiceError(f"The Spark job's service on the driver ({self.address[0]}:{self.address[1]}: key "
                            f"handles, counters) cannot be reached: {why}. The task stops; run the job again: "
                            f"answers already paid for are in the cache.")

    def _connect(self):
        """A new authenticated connection within ``timeout_s`` (the handshake has no timeout of its own)."""
        sock = socket.create_connection(self.address, timeout=self.timeout_s)  # nobody listening: fail fast
        sock.setblocking(True)  # multiprocessing's Connection reads the descriptor itself
        _no_delay(sock)
        box: dict = {}

        def connect() -> None:
            try:
                conn = Connection(sock.detach())
                answer_challenge(conn, self.token)  # what multiprocessing's Client does, on a socket without Nagle
                deliver_challenge(conn, self.token)
                box["conn"] = conn
            except Exception as e:  # handed to the caller
                box["error"] = e

        thread = threading.Thread(target=connect, name="inferframe-spark-connect", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        if "conn" in box:
            return box["conn"]
        if "error" in box:
            raise OSError(f"{type(box['error']).__name__}: {box['error']}")
        raise TimeoutError(f"no handshake within {self.timeout_s:g} s")

    def call(self, method: str, *args: Any) -> Any:
        """``service.method(*args)`` on the driver, within ``timeout_s``, or one ``ServiceError``."""
        with self._lock:
            conn = self._free.pop() if self._free else None
        try:
            if conn is None:
                conn = self._connect()
            conn.send((method, args))
            if not conn.poll(self.timeout_s):
                raise TimeoutError(f"no answer within {self.timeout_s:g} s")
            status, value = conn.recv()
        except (OSError, EOFError, TimeoutError) as e:
            raise self.unreachable(f"{type(e).__name__}: {e}") from None
        with self._lock:
            self._free.append(conn)
        if status != "ok":
            raise ServiceError(f"The Spark job's service refused {method}: {value}")
        return value
