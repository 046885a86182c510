"""Group: one member's side of a libspindle group (include/spindle/group.h).

Threads. By default deliveries, views and point-to-point messages arrive
on the library's predicate thread; the callbacks given as on_deliver,
on_view, on_p2p and on_send_ready run there, holding the GIL (ctypes takes
it), while the library holds its predicate lock: keep them short. With
dispatch=True they are queued instead and run inside Group.dispatch(), on
the thread that calls it (an event loop watching Group.fileno()), with no
library lock held. Either way, inside a callback of a group: send and
reserve never wait (Again when the window is full, then on_send_ready once
it has room), nor do p2p_send and p2p_reply (Again when the ring is full);
stats, status, member_id, size, identity and fileno may be called; every
other method would wait for the thread the callback runs on, and raises
RuntimeError saying so. Without on_deliver, each batch is put on a queue
that any Python thread drains with receive() or messages(); without
on_p2p, point-to-point messages queue for p2p_receive(). The blocking
calls (creation, send and reserve while the window is full, flush,
barrier, shutdown, leave, dispatch) release the GIL while they wait, so
other Python threads run meanwhile. A reservation (reserve()) belongs to
the thread that made it. on_replay is the exception: it runs inside the
constructor, on the thread that calls it, before the first delivery, in
dispatch mode too.

An exception raised by a callback never reaches the library's thread: in
dispatch mode dispatch() raises the first one to its caller; otherwise it
is logged on the logger "spindle" and dropped, and the library goes on.
One raised by on_replay fails the create: the constructor raises the
SpindleError of the code the library was given, chained from it.
"""

import contextlib
import ctypes
import dataclasses
import enum
import logging
import os
import queue
import threading
import weakref
from typing import Callable, NamedTuple, Sequence

from . import _lib
from . import errors
from .errors import Shutdown, TimedOut, check, make_error

_log = logging.getLogger("spindle")
_local = threading.local()  # .cores: the groups whose upcall this thread runs
_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]


class DispatchFlags(enum.IntEnum):
    """enum spindle_dispatch_flags: how Group.dispatch runs the queue."""

    ONE = _lib.DISPATCH_ONE  # at most one queued callback; never waits
    ALL = _lib.DISPATCH_ALL  # the callbacks queued when called; never waits
    BLOCKING = _lib.DISPATCH_BLOCKING  # callbacks as they come, until the member stops


DISPATCH_ONE = DispatchFlags.ONE
DISPATCH_ALL = DispatchFlags.ALL
DISPATCH_BLOCKING = DispatchFlags.BLOCKING


class ReplayKind(enum.IntEnum):
    """enum spindle_replay_kind: what a Replayed item carries."""

    SNAPSHOT = _lib.REPLAY_SNAPSHOT  # a state, which replaces the subgroup's
    MESSAGE = _lib.REPLAY_MESSAGE  # a logged message's payload, applied in order


REPLAY_SNAPSHOT = ReplayKind.SNAPSHOT
REPLAY_MESSAGE = ReplayKind.MESSAGE


class Mode(enum.IntEnum):
    """enum spindle_delivery_mode."""

    ATOMIC = _lib.MODE_ATOMIC  # total order, delivered once stable everywhere
    UNORDERED = _lib.MODE_UNORDERED  # delivered on receipt, per-sender FIFO


class Bootstrap(enum.IntEnum):
    """enum spindle_bootstrap_kind."""

    AUTO = _lib.BOOTSTRAP_AUTO
    DIR = _lib.BOOTSTRAP_DIR
    TCP = _lib.BOOTSTRAP_TCP


@dataclasses.dataclass(frozen=True)
class Subgroup:
    """struct spindle_subgroup_config: members and senders are member ids
    (indices into the group's member list); senders None means every
    member sends, in the order of members."""

    members: Sequence[int]
    senders: Sequence[int] | None = None
    window: int = 100
    max_payload: int = 1024
    mode: Mode | str = Mode.ATOMIC


class Message(NamedTuple):
    """One delivered message; data is a copy, valid for as long as needed."""

    subgroup: int
    sender_id: int
    sender_index: int
    seq: int
    view_id: int
    data: bytes


class P2PMessage(NamedTuple):
    """One point-to-point message (struct spindle_p2p_message): a query when
    query_id is not 0 (answer it with Group.p2p_reply), else one-way."""

    sender_id: int
    view_id: int
    query_id: int
    data: bytes

    @property
    def is_query(self):
        return self.query_id != 0


class Replayed(NamedTuple):
    """One item of a member's state given back from the logs when it joins
    with a log directory (struct spindle_replayed, docs/LOGS.md "Restart of
    one member"), to on_replay inside Group(), in order: per logged
    subgroup its own log's newest snapshot and the messages after it, then
    what the member that admitted it sent (received True). A SNAPSHOT's
    data is the state as of (view_id, seq) and replaces the subgroup's
    state (empty after a reset: start over); a MESSAGE is applied to it,
    and names its sender and sender_index. data is a copy. kind is a plain
    int for a kind this version of the bindings does not know."""

    kind: ReplayKind
    subgroup: int
    view_id: int
    seq: int
    sender: int
    sender_index: int
    data: bytes
    received: bool


def _replayed_from_c(item):
    try:
        kind = ReplayKind(item.kind)
    except ValueError:
        kind = item.kind
    data = ctypes.string_at(item.data, item.length) if item.length else b""
    return Replayed(
        kind, item.subgroup, item.view_id, item.seq, item.sender, item.sender_index, data,
        bool(item.received),
    )


class Identity(NamedTuple):
    """struct spindle_member_identity."""

    name: str
    incarnation: int


@dataclasses.dataclass(frozen=True)
class View:
    """An installed view (struct spindle_view_info), member ids in rank
    order. View 0, the group as created, is not reported by the library:
    the bindings make it up from the member list and identities."""

    view_id: int
    members: tuple
    my_rank: int
    joined: tuple = ()
    left: tuple = ()
    identities: tuple = ()
    joined_identities: tuple = ()
    left_identities: tuple = ()
    detected_ns: int = 0
    installed_ns: int = 0


def _stats_field(name, ctype):
    return (name, tuple if hasattr(ctype, "_length_") else int)


# struct spindle_stats as a dataclass; histograms are tuples. Follows the
# ctypes mirror, so a field added there appears here.
Stats = dataclasses.make_dataclass(
    "Stats",
    [_stats_field(name, ctype) for name, ctype in _lib.Stats._fields_],
    frozen=True,
    namespace={"__doc__": "struct spindle_stats of one member (group.h)."},
)
Stats.__module__ = __name__


def _stats_from_c(raw):
    values = {}
    for name, ctype in _lib.Stats._fields_:
        value = getattr(raw, name)
        values[name] = tuple(value) if hasattr(ctype, "_length_") else value
    return Stats(**values)


def _identities(pointer, count):
    if count == 0 or not pointer:
        return ()
    return tuple(
        Identity(pointer[i].name.decode(errors="replace"), pointer[i].incarnation)
        for i in range(count)
    )


def _ids(pointer, count):
    if count == 0 or not pointer:
        return ()
    return tuple(pointer[i] for i in range(count))


def _view_from_c(info):
    return View(
        view_id=info.view_id,
        members=_ids(info.members, info.num_members),
        my_rank=info.my_rank,
        joined=_ids(info.joined, info.num_joined),
        left=_ids(info.left, info.num_left),
        identities=_identities(info.identities, info.num_members),
        joined_identities=_identities(info.joined_identities, info.num_joined),
        left_identities=_identities(info.left_identities, info.num_left),
        detected_ns=info.detected_ns,
        installed_ns=info.installed_ns,
    )


def _encode(name, value):
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return os.fsencode(value)
    if isinstance(value, bytes):
        return value
    raise TypeError(f"option {name} must be a str or path, not {type(value).__name__}")


def _u32_array(values):
    values = list(values)
    return (ctypes.c_uint32 * max(len(values), 1))(*values), len(values)


def _mode(value):
    if isinstance(value, str):
        try:
            return Mode[value.upper()]
        except KeyError:
            raise ValueError(f"mode {value!r} is not 'atomic' or 'unordered'") from None
    return Mode(value)


# Option fields the bindings fill themselves: a callback or an array and
# its count. Every other field of struct spindle_group_options is a
# keyword argument of Group under its C name.
_MANAGED = {
    "deliver": "on_deliver",
    "deliver_ctx": "on_deliver",
    "view_changed": "on_view",
    "view_ctx": "on_view",
    "state_save": "state_save",
    "state_load": "state_load",
    "state_ctx": "state_save/state_load",
    "layout": "(not supported by the bindings yet)",
    "layout_ctx": "(not supported by the bindings yet)",
    "num_logged_subgroups": "logged_subgroups",
    "persisted": "(not supported by the bindings yet: use flush_persistent or persisted)",
    "persisted_ctx": "(not supported by the bindings yet: use flush_persistent or persisted)",
    "send_ready": "on_send_ready",
    "send_ready_ctx": "on_send_ready",
    "p2p_deliver": "on_p2p",
    "p2p_ctx": "on_p2p",
    "state_write": "(not supported by the bindings yet: use state_save/state_load)",
    "state_read": "(not supported by the bindings yet: use state_save/state_load)",
    "replay": "on_replay",
    "replay_ctx": "on_replay",
}


def _upcalls_running():
    """The cores whose upcall this thread is running, innermost last."""
    running = getattr(_local, "cores", None)
    if running is None:
        running = _local.cores = []
    return running


class _Core:
    """What the library's threads reach: the callbacks and their targets.
    It outlives the Group object until the handle is destroyed."""

    def __init__(
        self, on_deliver, on_view, state_save, state_load, on_p2p, on_send_ready, on_replay
    ):
        self.on_deliver = on_deliver
        self.on_view = on_view
        self.state_save = state_save
        self.state_load = state_load
        self.on_p2p = on_p2p
        self.on_send_ready = on_send_ready
        self.on_replay = on_replay
        self.replay_error = None  # what on_replay raised, for the constructor to raise
        self.dispatch = False  # dispatch mode: upcalls run inside Group.dispatch()
        # Dispatch mode: the first exception of an upcall, by the thread
        # whose dispatch() ran it (two threads may take turns dispatching).
        self.raised = {}
        self.queue = queue.SimpleQueue()
        self.p2p_queue = queue.SimpleQueue()
        self.view = None
        self.view_changed = threading.Condition()
        self.handle = None
        self.keep = []  # arrays and strings the options point to
        self.c_deliver = _lib.DELIVER_FN(self._deliver)
        self.c_view = _lib.VIEW_FN(self._view)
        self.c_state_save = _lib.STATE_SAVE_FN(self._state_save)
        self.c_state_load = _lib.STATE_LOAD_FN(self._state_load)
        self.c_p2p = _lib.P2P_DELIVER_FN(self._p2p)
        self.c_send_ready = _lib.SEND_READY_FN(self._send_ready)
        self.c_replay = _lib.REPLAY_FN(self._replay)

    @contextlib.contextmanager
    def _upcall(self, what):
        """Marks this thread as running an upcall of this group (Group's
        methods look). An exception of the callback does not reach C: in
        dispatch mode the first one is kept for dispatch() to raise on its
        caller's thread; otherwise (and after the first) it is logged."""
        running = _upcalls_running()
        running.append(self)
        try:
            yield
        except BaseException as error:
            if self.dispatch and threading.get_ident() not in self.raised:
                self.raised[threading.get_ident()] = error
            else:
                _log.exception("spindle: %s", what)
        finally:
            running.pop()

    def in_upcall(self):
        """Whether this thread runs an upcall of this group now."""
        return self in _upcalls_running()

    def _deliver(self, ctx, messages, count):
        with self._upcall("the delivery callback raised; the batch is dropped"):
            batch = []
            for i in range(count):
                m = messages[i]
                data = ctypes.string_at(m.data, m.length) if m.length else b""
                batch.append(
                    Message(m.subgroup, m.sender_id, m.sender_index, m.seq, m.view_id, data)
                )
            if self.on_deliver is not None:
                self.on_deliver(batch)
            else:
                self.queue.put(batch)

    def _p2p(self, ctx, raw):
        with self._upcall("the point-to-point callback raised; the message is dropped"):
            m = raw.contents
            data = ctypes.string_at(m.data, m.length) if m.length else b""
            message = P2PMessage(m.sender_id, m.view_id, m.query_id, data)
            if self.on_p2p is not None:
                self.on_p2p(message)
            else:
                self.p2p_queue.put(message)

    def _view(self, ctx, info):
        with self._upcall("the view callback raised"):
            view = _view_from_c(info.contents)
            with self.view_changed:
                self.view = view
                self.view_changed.notify_all()
            if self.on_view is not None:
                self.on_view(view)

    def _send_ready(self, ctx, subgroup):
        with self._upcall("the send-ready callback raised"):
            self.on_send_ready(subgroup)

    def _state_save(self, ctx, data, length):
        try:
            state = bytes(self.state_save())
            buffer = _libc.malloc(max(len(state), 1))
            if not buffer:
                return errors.ENOMEM
            ctypes.memmove(buffer, state, len(state))
            data[0] = buffer
            length[0] = len(state)
            return 0
        except BaseException:
            _log.exception("spindle: state_save raised; the join fails")
            return errors.EIO

    def _state_load(self, ctx, data, length):
        try:
            self.state_load(ctypes.string_at(data, length) if length else b"")
            return 0
        except BaseException:
            _log.exception("spindle: state_load raised; the join fails")
            return errors.EIO

    def _replay(self, ctx, raw):
        """On the thread inside spindle_group_create. An exception is kept
        for the constructor and refuses the item: with the SpindleError's
        own code when the callback raised one, else SPINDLE_EINVAL. Never
        SPINDLE_EAGAIN: that code makes the join ask again (view_join), and
        the records taken before it, the refused one too, are not sent
        again, so the application would never see them."""
        try:
            self.on_replay(_replayed_from_c(raw.contents))
            return 0
        except BaseException as error:
            if self.replay_error is None:
                self.replay_error = error
            code = error.code if isinstance(error, errors.SpindleError) else None
            if not isinstance(code, int) or code >= 0 or code == errors.EAGAIN:
                return errors.EINVAL
            return code

    def create_failed(self, code):
        """The exception for spindle_group_create's negative code: the
        library's, chained from what on_replay raised when that is why
        (KeyboardInterrupt and SystemExit go on as they are)."""
        error = make_error(code, "spindle_group_create")
        raised, self.replay_error = self.replay_error, None
        if raised is None:
            return error
        if not isinstance(raised, Exception):
            return raised
        detail = f"{error.detail}; on_replay raised {type(raised).__name__}: {raised}"
        chained = type(error)(error.code, detail, error.call)
        chained.__cause__ = raised
        return chained

    def destroy(self):
        handle, self.handle = self.handle, None
        if handle is None:
            return
        _lib.lib.spindle_group_destroy(handle)
        self.queue.put(None)  # ends messages() and receive() waits
        self.p2p_queue.put(None)


# Cores whose group is open, destroyed at interpreter exit (spindle/__init__).
_open = set()
_open_lock = threading.Lock()


def _finalize(core):
    with _open_lock:
        _open.discard(core)
    if _upcalls_running():
        # Collected inside an upcall (on the library's own thread, or in
        # dispatch()): destroying there would wait for that very upcall, or
        # do nothing. Leave it to the exit hook.
        with _open_lock:
            _open.add(core)
        return
    core.destroy()


def close_all():
    """Destroys every group still open (at interpreter exit)."""
    with _open_lock:
        cores = list(_open)
        _open.clear()
    for core in cores:
        core.destroy()


def _seconds_to_ms(timeout):
    if timeout is None:
        return -1
    if timeout < 0:
        raise ValueError(f"timeout {timeout} is negative (None waits without limit)")
    return int(timeout * 1000)


class Group:
    """This process's member of a group; spindle_group_create.

    Group(subgroups, self=..., num_members=..., bootstrap=..., ...) takes
    every field of struct spindle_group_options as a keyword argument
    under its C name (transport, provider, group_name, self, num_members,
    bootstrap, bootstrap_kind, bootstrap_timeout_ms, failure_timeout_ms,
    batching, null_sends, early_unlock, tolerate_failures, device, join,
    slow_member_ms, tie_breaker, member_name, incarnation, key_file,
    accept_key_file, poll_dedicated, poll_cpu, log_dir, dispatch,
    dispatch_queue_bytes, ...); fields not given keep
    spindle_group_options_init's defaults. Strings may be str or paths.
    logged_subgroups is a list of subgroup indices. Callbacks:
    on_deliver(list[Message]), on_view(View), state_save() -> bytes and
    state_load(bytes) for joins, on_p2p(P2PMessage) for point-to-point
    messages (without it they queue for p2p_receive()),
    on_send_ready(subgroup) once a window that made a send inside a
    callback raise Again has room again, on_replay(Replayed) for a member
    that joins with log_dir and logged_subgroups (its state from the logs,
    given back inside the constructor; an exception there fails it).
    dispatch=True: the callbacks run inside dispatch(), on the thread that
    calls it, when fileno() is readable. Blocks until every member is there
    (or the join is done).
    """

    def __init__(
        self,
        subgroups=(),
        /,
        *,
        on_deliver: Callable[[list], None] | None = None,
        on_view: Callable[[View], None] | None = None,
        state_save: Callable[[], bytes] | None = None,
        state_load: Callable[[bytes], None] | None = None,
        on_p2p: Callable[[P2PMessage], None] | None = None,
        on_send_ready: Callable[[int], None] | None = None,
        on_replay: Callable[[Replayed], None] | None = None,
        logged_subgroups: Sequence[int] | None = None,
        _setup=None,
        **options,
    ):
        core = _Core(
            on_deliver, on_view, state_save, state_load, on_p2p, on_send_ready, on_replay
        )
        self._core = core
        self._closed = False
        opts = _lib.GroupOptions()
        if _setup is not None:
            ctypes.pointer(opts)[0] = _setup.options
        else:
            check(
                _lib.lib.spindle_group_options_init_sized(ctypes.byref(opts), _lib.OPTIONS_SIZE),
                "spindle_group_options_init",
            )
        self._apply_options(opts, options)
        if logged_subgroups is not None:
            array, count = _u32_array(logged_subgroups)
            core.keep.append(array)
            opts.logged_subgroups = array
            opts.num_logged_subgroups = count
        opts.deliver = core.c_deliver
        opts.view_changed = core.c_view
        opts.p2p_deliver = core.c_p2p
        if on_send_ready is not None:
            opts.send_ready = core.c_send_ready
        core.dispatch = bool(opts.dispatch)
        if state_save is not None:
            opts.state_save = core.c_state_save
        if state_load is not None:
            opts.state_load = core.c_state_load
        if on_replay is not None:
            opts.replay = core.c_replay
        if subgroups:
            configs, count = self._subgroup_configs(subgroups)
        elif _setup is not None:
            configs, count = _setup.subgroups, _setup.num_subgroups
        else:
            raise ValueError("a group needs at least one Subgroup")
        core.keep.append(opts)
        handle = ctypes.c_void_p()
        code = _lib.lib.spindle_group_create_sized(
            ctypes.byref(opts),
            _lib.OPTIONS_SIZE,
            configs,
            _lib.SUBGROUP_SIZE,
            count,
            ctypes.byref(handle),
        )
        if code < 0:
            raise core.create_failed(code)
        core.replay_error = None
        core.handle = handle.value
        with _open_lock:
            _open.add(core)
        self._finalizer = weakref.finalize(self, _finalize, core)
        self._finalizer.atexit = False  # close_all() does it, before the log sink goes
        self._first_view()

    @classmethod
    def from_config(cls, path, member, /, **kwargs):
        """Member `member` of the group a configuration file describes
        (spindle_config_load, spindle_group_setup_from_config). Keyword
        arguments are those of Group and override the file's options;
        subgroups come from the file unless given as `subgroups`."""
        config = ctypes.c_void_p()
        check(
            _lib.lib.spindle_config_load(os.fsencode(path), ctypes.byref(config)),
            "spindle_config_load",
        )
        setup = _lib.GroupSetup()
        try:
            check(
                _lib.lib.spindle_group_setup_from_config_sized(
                    config, member, ctypes.byref(setup), _lib.OPTIONS_SIZE, _lib.SUBGROUP_SIZE
                ),
                "spindle_group_setup_from_config",
            )
        finally:
            _lib.lib.spindle_config_free(config)
        return cls._from_setup(setup, kwargs)

    @classmethod
    def from_env(cls, config=None, /, **kwargs):
        """This process's member of a group its launcher started (srun,
        PMIx, spindle-run: spindle_group_setup_from_env), with an optional
        configuration file for the rest. Keyword arguments as from_config."""
        handle = ctypes.c_void_p()
        if config is not None:
            check(
                _lib.lib.spindle_config_load(os.fsencode(config), ctypes.byref(handle)),
                "spindle_config_load",
            )
        setup = _lib.GroupSetup()
        try:
            check(
                _lib.lib.spindle_group_setup_from_env_sized(
                    handle, ctypes.byref(setup), _lib.OPTIONS_SIZE, _lib.SUBGROUP_SIZE
                ),
                "spindle_group_setup_from_env",
            )
        finally:
            _lib.lib.spindle_config_free(handle)
        return cls._from_setup(setup, kwargs)

    @classmethod
    def _from_setup(cls, setup, kwargs):
        try:
            subgroups = kwargs.pop("subgroups", ())
            group = cls(subgroups, _setup=setup, **kwargs)
            group.local_rank = setup.local_rank
            group.setup_subgroups = tuple(
                _subgroup_from_c(setup.subgroups[i]) for i in range(setup.num_subgroups)
            )
            return group
        finally:
            _lib.lib.spindle_group_setup_free_sized(ctypes.byref(setup), _lib.OPTIONS_SIZE)

    # -- options ------------------------------------------------------

    def _apply_options(self, opts, options):
        fields = dict(_lib.GroupOptions._fields_)
        for name, value in options.items():
            if name in _MANAGED:
                raise TypeError(f"option {name} is set through {_MANAGED[name]}")
            if name not in fields:
                known = ", ".join(n for n in fields if n not in _MANAGED)
                raise TypeError(f"unknown option {name!r}; the options are: {known}")
            ctype = fields[name]
            if ctype is ctypes.c_char_p:
                value = _encode(name, value)
                self._core.keep.append(value)
            elif name == "bootstrap_kind" and isinstance(value, str):
                try:
                    value = Bootstrap[value.upper()]
                except KeyError:
                    raise ValueError(
                        f"bootstrap_kind {value!r} is not 'auto', 'dir' or 'tcp'"
                    ) from None
            setattr(opts, name, value)

    def _subgroup_configs(self, subgroups):
        configs = (_lib.SubgroupConfig * len(subgroups))()
        for i, sub in enumerate(subgroups):
            if not isinstance(sub, Subgroup):
                raise TypeError(f"subgroup {i} is a {type(sub).__name__}, not a Subgroup")
            members, num_members = _u32_array(sub.members)
            senders, num_senders = _u32_array(
                sub.members if sub.senders is None else sub.senders
            )
            self._core.keep += [members, senders]
            configs[i] = _lib.SubgroupConfig(
                members, num_members, senders, num_senders, sub.window, sub.max_payload,
                _mode(sub.mode),
            )
        self._core.keep.append(configs)
        return configs, len(subgroups)

    def _first_view(self):
        """View 0 (the library reports only later views; a joiner's first
        one is reported)."""
        if self._core.view is not None:
            return
        lib, handle = _lib.lib, self._core.handle
        size, me = lib.spindle_group_size(handle), lib.spindle_group_self(handle)
        identities = []
        for member in range(size):
            raw = _lib.MemberIdentity()
            if lib.spindle_group_identity(handle, member, ctypes.byref(raw)) == 0:
                identities.append(Identity(raw.name.decode(errors="replace"), raw.incarnation))
        view = View(0, tuple(range(size)), me, identities=tuple(identities))
        with self._core.view_changed:
            if self._core.view is None:
                self._core.view = view

    # -- state --------------------------------------------------------

    def _handle(self, call, *, in_upcall=False):
        """The library's handle for call. Inside a callback of this group
        only the calls with in_upcall (never waiting there) are allowed;
        the others would wait for the very thread the callback runs on."""
        if not in_upcall and self._core.in_upcall():
            raise RuntimeError(
                f"{call} called from a callback of this group would wait for the thread "
                "the callback runs on (the library's, or the one inside dispatch()); "
                "call it after the callback returns, or from another thread"
            )
        if self._core.handle is None:
            raise Shutdown.make("the group is closed", call)
        return self._core.handle

    @property
    def member_id(self):
        """This member's id (spindle_group_self)."""
        return _lib.lib.spindle_group_self(self._handle("member_id", in_upcall=True))

    @property
    def size(self):
        """Number of members (spindle_group_size)."""
        return _lib.lib.spindle_group_size(self._handle("size", in_upcall=True))

    @property
    def view(self):
        """The current View (the last one installed)."""
        return self._core.view

    def wait_for_view(self, predicate, timeout=None):
        """Waits until predicate(view) is true of the current view and
        returns it; TimedOut after timeout seconds. Not from a callback
        (the view may come through the very thread it runs on)."""
        self._handle("wait_for_view")
        with self._core.view_changed:
            if not self._core.view_changed.wait_for(
                lambda: self._core.view is not None and predicate(self._core.view), timeout
            ):
                raise TimedOut.make(
                    f"no such view within {timeout} s; the last is {self._core.view}",
                    "wait_for_view",
                )
            return self._core.view

    def identity(self, member_id):
        """Identity of member_id in the current view (spindle_group_identity)."""
        raw = _lib.MemberIdentity()
        check(
            _lib.lib.spindle_group_identity(
                self._handle("identity", in_upcall=True), member_id, ctypes.byref(raw)
            ),
            "spindle_group_identity",
        )
        return Identity(raw.name.decode(errors="replace"), raw.incarnation)

    def status(self):
        """None while this member takes part in the group; else the
        SpindleError that stopped it (EMINORITY, EREMOVED, ...), not raised."""
        code = _lib.lib.spindle_group_status(self._handle("status", in_upcall=True))
        if code == 0:
            return None
        return make_error(code, "spindle_group_status")

    def stats(self):
        """This member's Stats (spindle_group_stats)."""
        raw = _lib.Stats()
        check(
            _lib.lib.spindle_group_stats_sized(
                self._handle("stats", in_upcall=True), ctypes.byref(raw), _lib.STATS_SIZE
            ),
            "spindle_group_stats",
        )
        return _stats_from_c(raw)

    # -- sending ------------------------------------------------------

    def _send_flags(self, call, block):
        """The handle and reserve flags of a send or reserve. Inside a
        callback of this group it never waits (the window may wait for
        that very callback): as with block=False, whatever block says."""
        handle = self._handle(call, in_upcall=True)
        if not block or self._core.in_upcall():
            return handle, _lib.RESERVE_NONBLOCK
        return handle, 0

    def send(self, subgroup, data, *, block=True):
        """Sends data (any bytes-like object) in subgroup: reserve, copy,
        commit. Blocks while the window is full, or a view change is under
        way, unless block=False, which raises Again instead (on_send_ready
        follows in either case). MessageTooLarge above max_payload.

        Inside a callback of this group (on_deliver, on_view, on_p2p,
        on_send_ready) it never blocks: Again when the window is full, or
        while a view change is under way; on_send_ready(subgroup) is then
        called once the window has room, the moment to send what had to
        wait (spindle_send_ready_fn)."""
        handle, flags = self._send_flags("send", block)
        if isinstance(data, bytes):
            buffer, size = data, len(data)
        else:
            view = memoryview(data)
            size = view.nbytes
            if view.readonly or not view.c_contiguous:
                buffer = view.tobytes()  # ctypes takes only writable buffers in place
            else:
                buffer = (ctypes.c_char * size).from_buffer(view) if size else None
        check(_lib.lib.spindle_send(handle, subgroup, buffer, size, flags), "spindle_send")

    @contextlib.contextmanager
    def reserve(self, subgroup, size, *, block=True):
        """In-place send: `with group.reserve(0, n) as slot: slot[:] = ...`
        gives a writable memoryview of n bytes in the ring, committed when
        the block ends. The library cannot take a reservation back: when
        the block raises, the slot is zeroed and committed anyway (the
        members deliver n zero bytes) and the exception goes on. Use the
        memoryview only inside the block. Inside a callback it never
        blocks, as send; the block must end before the callback returns."""
        handle, flags = self._send_flags("reserve", block)
        slot = ctypes.c_void_p()
        check(
            _lib.lib.spindle_reserve(handle, subgroup, size, flags, ctypes.byref(slot)),
            "spindle_reserve",
        )
        view = memoryview((ctypes.c_char * size).from_address(slot.value)).cast("B")
        completed = False
        try:
            yield view
            completed = True
        finally:
            if not completed and size:
                ctypes.memset(slot.value, 0, size)
            with contextlib.suppress(BufferError):
                view.release()
            check(_lib.lib.spindle_commit(handle, subgroup), "spindle_commit")

    # -- point to point (docs/P2P.md) --------------------------------

    def _p2p_handle(self, call, block):
        """The handle for a p2p send or reply, which may run inside a
        callback (the library's thread): there it never waits."""
        if self._core.handle is None:
            raise Shutdown.make("the group is closed", call)
        if self._core.in_upcall() or not block:
            return self._core.handle, _lib.P2P_NONBLOCK
        return self._core.handle, 0

    def p2p_send(self, target, data, *, block=True):
        """Sends data (bytes, at most P2P_MAX_PAYLOAD) to member `target`
        alone, in order with this member's other messages to it;
        spindle_p2p_send. Blocks while the ring to target is full unless
        block=False, or inside a callback, where it raises Again."""
        handle, flags = self._p2p_handle("p2p_send", block)
        payload = bytes(data)
        check(
            _lib.lib.spindle_p2p_send(handle, target, payload, len(payload), flags),
            "spindle_p2p_send",
        )

    def p2p_query(self, target, data, timeout=None):
        """Sends a query to member `target` and returns its reply (bytes);
        spindle_p2p_query. TimedOut after timeout seconds; PeerFailed when
        the target fails or the view changes first. Not from a callback."""
        handle = self._handle("p2p_query")
        payload = bytes(data)
        reply = ctypes.create_string_buffer(_lib.P2P_MAX_PAYLOAD)
        length = ctypes.c_size_t()
        check(
            _lib.lib.spindle_p2p_query(
                handle,
                target,
                payload,
                len(payload),
                reply,
                _lib.P2P_MAX_PAYLOAD,
                ctypes.byref(length),
                _seconds_to_ms(timeout),
            ),
            "spindle_p2p_query",
        )
        return reply.raw[: length.value]

    def p2p_reply(self, query, data, *, block=True):
        """Answers query (a P2PMessage with is_query) with data; from
        on_p2p itself (then it never waits: Again when the ring is full) or
        later from any thread; spindle_p2p_reply."""
        handle, flags = self._p2p_handle("p2p_reply", block)
        raw = _lib.P2PMessage(query.sender_id, query.view_id, query.query_id, None, 0)
        payload = bytes(data)
        check(
            _lib.lib.spindle_p2p_reply(handle, ctypes.byref(raw), payload, len(payload), flags),
            "spindle_p2p_reply",
        )

    def p2p_receive(self, timeout=None):
        """The next P2PMessage (without on_p2p), in the order taken.
        TimedOut after timeout seconds; Shutdown once the group is closed
        and every message was taken."""
        return self._take(
            self._core.p2p_queue, self._core.on_p2p, "p2p_receive",
            "point-to-point messages go to on_p2p; p2p_receive() has nothing",
            "messages are queued by that very thread", "no point-to-point message", timeout)

    # -- receiving ----------------------------------------------------

    def receive(self, timeout=None):
        """The next batch of Messages, in delivery order (without
        on_deliver). TimedOut after timeout seconds; Shutdown once the
        group is closed and every batch was taken."""
        return self._take(
            self._core.queue, self._core.on_deliver, "receive",
            "deliveries go to on_deliver; receive() has nothing",
            "batches are queued by that very thread", "no delivery", timeout)

    def _take(self, source, callback, name, elsewhere, same_thread, nothing, timeout):
        """The next item of source, a queue the library's thread fills
        (None once the group is closed), for receive() and p2p_receive()."""
        if callback is not None:
            raise RuntimeError(elsewhere)
        if self._core.in_upcall():
            raise RuntimeError(
                f"{name}() called from a callback of this group: {same_thread}"
            )
        try:
            item = source.get(timeout=timeout)
        except queue.Empty:
            raise TimedOut.make(f"{nothing} within {timeout} s", name) from None
        if item is None:
            source.put(None)  # for the next caller too
            raise Shutdown.make("the group is closed", name)
        return item

    def messages(self, timeout=None):
        """Iterates over delivered Messages one at a time until the group
        is closed; TimedOut when none came for timeout seconds."""
        while True:
            try:
                batch = self.receive(timeout)
            except Shutdown:
                return
            yield from batch

    # -- dispatch mode (docs/DISPATCH.md) ------------------------------

    def fileno(self):
        """Dispatch mode: the descriptor (spindle_group_fd) that is readable
        while callbacks are queued for dispatch(), and once the member
        stopped; for selectors, select or asyncio's loop.add_reader. Only
        poll it; take it out of the selector before close(), which closes
        it. InvalidArgument when the group is not in dispatch mode."""
        return check(
            _lib.lib.spindle_group_fd(self._handle("fileno", in_upcall=True)), "spindle_group_fd"
        )

    def dispatch(self, flags=DISPATCH_ALL):
        """Dispatch mode: runs the queued callbacks (on_deliver, on_view,
        on_p2p, on_send_ready, a joiner's state_save) on the calling thread,
        in the order they happened, with no library lock held; returns how
        many ran (0: none was queued); spindle_dispatch. flags:
        DISPATCH_ONE (at most one), DISPATCH_ALL (those queued now) or
        DISPATCH_BLOCKING (as they come, until the member stops). The GIL is
        released while the library waits or works; each callback takes it.

        The first exception a callback raises is raised here once the call
        returns (the callbacks queued after it in the same call still ran;
        a later exception is logged). Once the queue is empty and the member
        stopped, raises Shutdown (shutdown or leave) or the error that
        stopped it (Removed, Minority, ...). Not from a callback."""
        handle = self._handle("dispatch")
        core = self._core
        ran = _lib.lib.spindle_dispatch(handle, int(flags))
        error = make_error(ran, "spindle_dispatch") if ran < 0 else None
        raised = core.raised.pop(threading.get_ident(), None)
        if raised is not None:
            raise raised
        if error is not None:
            raise error
        return ran

    # -- collective calls and the end ---------------------------------

    def flush(self, timeout=None):
        """Waits until this member's messages are delivered locally (and
        received everywhere in unordered subgroups); spindle_flush."""
        handle = self._handle("flush")
        check(_lib.lib.spindle_flush(handle, _seconds_to_ms(timeout)), "spindle_flush")

    def flush_persistent(self, subgroup=None, timeout=None):
        """Waits until this member's messages in a logged subgroup (None:
        every logged subgroup) are on stable storage at every member;
        spindle_flush_persistent."""
        handle = self._handle("flush_persistent")
        which = 0xFFFFFFFF if subgroup is None else subgroup
        check(
            _lib.lib.spindle_flush_persistent(handle, which, _seconds_to_ms(timeout)),
            "spindle_flush_persistent",
        )

    def persisted(self, subgroup):
        """(view_id, local, global) persistence frontiers of a logged
        subgroup in the current view; spindle_group_persisted."""
        handle = self._handle("persisted")
        view_id, local, glob = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        check(
            _lib.lib.spindle_group_persisted(
                handle, subgroup, ctypes.byref(view_id), ctypes.byref(local), ctypes.byref(glob)
            ),
            "spindle_group_persisted",
        )
        return view_id.value, local.value, glob.value

    def snapshot(self, subgroup, view_id, seq, state):
        """Stores state (bytes) built from a logged subgroup's messages
        before (view_id, seq) in this member's log directory, so that the
        log below it can be compacted; spindle_group_snapshot."""
        handle = self._handle("snapshot")
        data = bytes(state)
        check(
            _lib.lib.spindle_group_snapshot(handle, subgroup, view_id, seq, data, len(data)),
            "spindle_group_snapshot",
        )

    def barrier(self, timeout=None):
        """Returns once every member called it; spindle_barrier."""
        handle = self._handle("barrier")
        check(_lib.lib.spindle_barrier(handle, _seconds_to_ms(timeout)), "spindle_barrier")

    def shutdown(self, timeout=30.0):
        """Orderly, collective end (spindle_group_shutdown): flush, wait for
        every member, stop. close() afterwards (or leave the with block)."""
        handle = self._handle("shutdown")
        check(
            _lib.lib.spindle_group_shutdown(handle, _seconds_to_ms(timeout)),
            "spindle_group_shutdown",
        )

    def leave(self, timeout=30.0):
        """Graceful departure (tolerate_failures): the others install a
        view without this member; spindle_group_leave. close() afterwards."""
        handle = self._handle("leave")
        check(
            _lib.lib.spindle_group_leave(handle, _seconds_to_ms(timeout)),
            "spindle_group_leave",
        )

    def set_keys(self, key_file, accept_key_file=None):
        """Key rotation; spindle_group_set_keys."""
        handle = self._handle("set_keys")
        check(
            _lib.lib.spindle_group_set_keys(
                handle, _encode("key_file", key_file), _encode("accept_key_file", accept_key_file)
            ),
            "spindle_group_set_keys",
        )

    def close(self):
        """Releases the member (spindle_group_destroy): not an orderly
        end by itself (see shutdown and leave). Idempotent. No other
        thread may be inside a call on this group meanwhile."""
        if self._core.in_upcall():
            raise RuntimeError(
                "close() called from a callback of this group: the group would be destroyed "
                "under the thread that runs the callback"
            )
        self._finalizer()

    @property
    def closed(self):
        return self._core.handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self.closed:
            return "<spindle.Group closed>"
        return f"<spindle.Group member {self.member_id} of {self.size}, view {self.view.view_id}>"


def _subgroup_from_c(config):
    return Subgroup(
        members=_ids(config.members, config.num_members),
        senders=_ids(config.senders, config.num_senders),
        window=config.window_size,
        max_payload=config.max_payload,
        mode=Mode(config.mode),
    )

