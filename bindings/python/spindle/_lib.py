"""The C library as ctypes sees it: loading, struct mirrors, prototypes.

Every structure mirrors one of include/spindle/*.h field for field, in the
same order; tests/test_layout.py compares them with the C compiler's view of
the installed headers (sizes, offsets and the field names in each header),
so a header change that is not made here fails a test instead of corrupting
memory. A field added to a C structure is one line added here, at the same
place.
"""

import ctypes
import ctypes.util
import os

SONAME = "libspindle.so.0"

# Constants of the public headers (group.h, view.h).
MAX_PAYLOAD = 1 << 20
MAX_WINDOW = 100000
MAX_SUBGROUPS = 256
MAX_MEMBERS = 64
MEMBER_NAME_MAX = 64
HIST_BUCKETS = 24
RESERVE_NONBLOCK = 1
P2P_MAX_PAYLOAD = 4096  # SPINDLE_P2P_MAX_PAYLOAD (p2p.h)
P2P_NONBLOCK = 1  # SPINDLE_P2P_NONBLOCK
RANK_ANY = 0xFFFFFFFF
DISPATCH_OVERHEAD = 256  # SPINDLE_DISPATCH_OVERHEAD: a queued message's cost besides its length
DISPATCH_ONE = 1  # enum spindle_dispatch_flags
DISPATCH_ALL = 2
DISPATCH_BLOCKING = 3
REPLAY_SNAPSHOT = 1  # enum spindle_replay_kind
REPLAY_MESSAGE = 2

MODE_ATOMIC = 0
MODE_UNORDERED = 1

BOOTSTRAP_AUTO = 0
BOOTSTRAP_DIR = 1
BOOTSTRAP_TCP = 2

c_uint32_p = ctypes.POINTER(ctypes.c_uint32)


class MemberIdentity(ctypes.Structure):
    """struct spindle_member_identity (view.h)."""

    _fields_ = [
        ("name", ctypes.c_char * MEMBER_NAME_MAX),
        ("incarnation", ctypes.c_uint64),
    ]


class ViewInfo(ctypes.Structure):
    """struct spindle_view_info (view.h)."""

    _fields_ = [
        ("view_id", ctypes.c_uint64),
        ("num_members", ctypes.c_uint32),
        ("members", c_uint32_p),
        ("my_rank", ctypes.c_uint32),
        ("num_joined", ctypes.c_uint32),
        ("joined", c_uint32_p),
        ("num_left", ctypes.c_uint32),
        ("left", c_uint32_p),
        ("detected_ns", ctypes.c_uint64),
        ("installed_ns", ctypes.c_uint64),
        ("identities", ctypes.POINTER(MemberIdentity)),
        ("joined_identities", ctypes.POINTER(MemberIdentity)),
        ("left_identities", ctypes.POINTER(MemberIdentity)),
    ]


class SubgroupLayout(ctypes.Structure):
    """struct spindle_subgroup_layout (view.h)."""

    _fields_ = [
        ("num_members", ctypes.c_uint32),
        ("members", ctypes.c_uint32 * MAX_MEMBERS),
        ("num_senders", ctypes.c_uint32),
        ("senders", ctypes.c_uint32 * MAX_MEMBERS),
    ]


class SubgroupConfig(ctypes.Structure):
    """struct spindle_subgroup_config (group.h)."""

    _fields_ = [
        ("members", c_uint32_p),
        ("num_members", ctypes.c_uint32),
        ("senders", c_uint32_p),
        ("num_senders", ctypes.c_uint32),
        ("window_size", ctypes.c_uint32),
        ("max_payload", ctypes.c_uint32),
        ("mode", ctypes.c_int),  # enum spindle_delivery_mode
    ]


class MessageC(ctypes.Structure):
    """struct spindle_message (group.h)."""

    _fields_ = [
        ("subgroup", ctypes.c_uint32),
        ("sender_id", ctypes.c_uint32),
        ("sender_index", ctypes.c_uint64),
        ("seq", ctypes.c_uint64),
        ("data", ctypes.c_void_p),
        ("length", ctypes.c_uint32),
        ("view_id", ctypes.c_uint64),
    ]


DELIVER_FN = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.POINTER(MessageC), ctypes.c_size_t
)
VIEW_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ViewInfo))
STATE_SAVE_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t),
)
STATE_LOAD_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
)
STATE_WRITE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
STATE_READ_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_uint64,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_bool,
)
LAYOUT_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.POINTER(ViewInfo),
    ctypes.c_uint32,
    ctypes.POINTER(SubgroupLayout),
)
PERSISTED_FN = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64
)
SEND_READY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32)


class ReplayedItem(ctypes.Structure):
    """struct spindle_replayed (group.h)."""

    _fields_ = [
        ("kind", ctypes.c_uint32),  # enum spindle_replay_kind
        ("subgroup", ctypes.c_uint32),
        ("view_id", ctypes.c_uint64),
        ("seq", ctypes.c_uint64),
        ("sender", ctypes.c_uint32),
        ("sender_index", ctypes.c_uint64),
        ("data", ctypes.c_void_p),
        ("length", ctypes.c_size_t),
        ("received", ctypes.c_bool),
    ]


REPLAY_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ReplayedItem))


class P2PMessage(ctypes.Structure):
    """struct spindle_p2p_message (p2p.h)."""

    _fields_ = [
        ("sender_id", ctypes.c_uint32),
        ("view_id", ctypes.c_uint64),
        ("query_id", ctypes.c_uint64),
        ("data", ctypes.c_void_p),
        ("length", ctypes.c_uint32),
    ]


P2P_DELIVER_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(P2PMessage))
LOG_SINK_FN = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p
)


class GroupOptions(ctypes.Structure):
    """struct spindle_group_options (group.h)."""

    _fields_ = [
        ("transport", ctypes.c_char_p),
        ("provider", ctypes.c_char_p),
        ("group_name", ctypes.c_char_p),
        ("self", ctypes.c_uint32),
        ("num_members", ctypes.c_uint32),
        ("bootstrap", ctypes.c_char_p),
        ("bootstrap_kind", ctypes.c_int),  # enum spindle_bootstrap_kind
        ("bootstrap_timeout_ms", ctypes.c_int),
        ("failure_timeout_ms", ctypes.c_int),
        ("batching", ctypes.c_bool),
        ("null_sends", ctypes.c_bool),
        ("early_unlock", ctypes.c_bool),
        ("deliver", DELIVER_FN),
        ("deliver_ctx", ctypes.c_void_p),
        ("tolerate_failures", ctypes.c_bool),
        ("view_changed", VIEW_FN),
        ("view_ctx", ctypes.c_void_p),
        ("device", ctypes.c_char_p),
        ("join", ctypes.c_char_p),
        ("state_save", STATE_SAVE_FN),
        ("state_load", STATE_LOAD_FN),
        ("state_ctx", ctypes.c_void_p),
        ("layout", LAYOUT_FN),
        ("layout_ctx", ctypes.c_void_p),
        ("slow_member_ms", ctypes.c_int),
        ("tie_breaker", ctypes.c_bool),
        ("member_name", ctypes.c_char_p),
        ("incarnation", ctypes.c_uint64),
        ("key_file", ctypes.c_char_p),
        ("accept_key_file", ctypes.c_char_p),
        ("poll_dedicated", ctypes.c_bool),
        ("poll_cpu", ctypes.c_uint32),
        ("log_dir", ctypes.c_char_p),
        ("logged_subgroups", c_uint32_p),
        ("num_logged_subgroups", ctypes.c_uint32),
        ("persisted", PERSISTED_FN),
        ("persisted_ctx", ctypes.c_void_p),
        ("dispatch", ctypes.c_bool),
        ("dispatch_queue_bytes", ctypes.c_size_t),
        ("send_ready", SEND_READY_FN),
        ("send_ready_ctx", ctypes.c_void_p),
        ("admin_dir", ctypes.c_char_p),
        ("state_write", STATE_WRITE_FN),
        ("state_read", STATE_READ_FN),
        ("p2p_deliver", P2P_DELIVER_FN),
        ("p2p_ctx", ctypes.c_void_p),
        ("p2p_window", ctypes.c_uint32),
        ("replay", REPLAY_FN),
        ("replay_ctx", ctypes.c_void_p),
        ("own_inline", ctypes.c_bool),
    ]


class Stats(ctypes.Structure):
    """struct spindle_stats (group.h)."""

    _fields_ = [
        ("messages_sent", ctypes.c_uint64),
        ("messages_delivered", ctypes.c_uint64),
        ("nulls_sent", ctypes.c_uint64),
        ("nulls_received", ctypes.c_uint64),
        ("writes_posted", ctypes.c_uint64),
        ("doorbells", ctypes.c_uint64),
        ("pushes", ctypes.c_uint64),
        ("post_ns", ctypes.c_uint64),
        ("predicate_passes", ctypes.c_uint64),
        ("sleeps", ctypes.c_uint64),
        ("wakeups_sent", ctypes.c_uint64),
        ("send_batches", ctypes.c_uint64 * HIST_BUCKETS),
        ("receive_batches", ctypes.c_uint64 * HIST_BUCKETS),
        ("delivery_batches", ctypes.c_uint64 * HIST_BUCKETS),
        ("send_batch_count", ctypes.c_uint64),
        ("send_batch_messages", ctypes.c_uint64),
        ("receive_batch_count", ctypes.c_uint64),
        ("receive_batch_messages", ctypes.c_uint64),
        ("delivery_batch_count", ctypes.c_uint64),
        ("delivery_batch_messages", ctypes.c_uint64),
        ("pinned_bytes", ctypes.c_uint64),
        ("window_full", ctypes.c_uint64),
        ("window_full_ns", ctypes.c_uint64),
        ("window_holder", ctypes.c_int32),
        ("log_records_durable", ctypes.c_uint64),
        ("log_bytes_durable", ctypes.c_uint64),
        ("log_syncs", ctypes.c_uint64),
        ("log_deliveries_held", ctypes.c_uint64),
        ("log_queue_waits", ctypes.c_uint64),
        ("dispatch_queue_bytes", ctypes.c_uint64),
        ("dispatch_queue_peak", ctypes.c_uint64),
        ("log_catchup_records", ctypes.c_uint64),
        ("log_catchup_bytes", ctypes.c_uint64),
    ]


class GroupSetup(ctypes.Structure):
    """struct spindle_group_setup (setup.h)."""

    _fields_ = [
        ("options", GroupOptions),
        ("subgroups", ctypes.POINTER(SubgroupConfig)),
        ("num_subgroups", ctypes.c_uint32),
        ("local_rank", ctypes.c_uint32),
        ("storage", ctypes.c_void_p),  # struct spindle_group_setup_storage *, private
    ]


# The sizes the sized entry points are given: the mirrors', as a C program
# passes its header's sizeof.
OPTIONS_SIZE = ctypes.sizeof(GroupOptions)
SUBGROUP_SIZE = ctypes.sizeof(SubgroupConfig)
STATS_SIZE = ctypes.sizeof(Stats)

# The structures the layout test holds against the headers: C name, mirror.
STRUCTS = {
    "spindle_member_identity": MemberIdentity,
    "spindle_view_info": ViewInfo,
    "spindle_subgroup_layout": SubgroupLayout,
    "spindle_subgroup_config": SubgroupConfig,
    "spindle_message": MessageC,
    "spindle_p2p_message": P2PMessage,
    "spindle_replayed": ReplayedItem,
    "spindle_group_options": GroupOptions,
    "spindle_stats": Stats,
    "spindle_group_setup": GroupSetup,
}

# Prototypes: name, result type, argument types. Opaque handles
# (spindle_group_t *, struct spindle_config *) are c_void_p.
_PROTOTYPES = [
    ("spindle_strerror", ctypes.c_char_p, [ctypes.c_int]),
    ("spindle_errmsg", ctypes.c_char_p, []),
    ("spindle_version", ctypes.c_char_p, []),
    # The sized entry points (docs/ABI.md "Growing a struct"), each given
    # the size of this module's mirror (OPTIONS_SIZE ... below): a later
    # library with longer structs reads and writes only what the mirror has.
    (
        "spindle_group_options_init_sized",
        ctypes.c_int,
        [ctypes.POINTER(GroupOptions), ctypes.c_size_t],
    ),
    (
        "spindle_group_create_sized",
        ctypes.c_int,
        [
            ctypes.POINTER(GroupOptions),
            ctypes.c_size_t,
            ctypes.POINTER(SubgroupConfig),
            ctypes.c_size_t,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_void_p),
        ],
    ),
    (
        "spindle_reserve",
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.POINTER(ctypes.c_void_p),
        ],
    ),
    ("spindle_commit", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32]),
    (
        "spindle_send",
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
        ],
    ),
    (
        "spindle_p2p_send",
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint],
    ),
    (
        "spindle_p2p_query",
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_int,
        ],
    ),
    (
        "spindle_p2p_reply",
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.POINTER(P2PMessage),
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
        ],
    ),
    ("spindle_flush", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    ("spindle_flush_persistent", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int]),
    (
        "spindle_group_persisted",
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint64),
        ],
    ),
    (
        "spindle_group_snapshot",
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_uint64,
            ctypes.c_uint64,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ],
    ),
    ("spindle_barrier", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    (
        "spindle_group_stats_sized",
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.POINTER(Stats), ctypes.c_size_t],
    ),
    ("spindle_group_status", ctypes.c_int, [ctypes.c_void_p]),
    ("spindle_group_self", ctypes.c_int, [ctypes.c_void_p]),
    ("spindle_group_size", ctypes.c_int, [ctypes.c_void_p]),
    (
        "spindle_group_identity",
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(MemberIdentity)],
    ),
    ("spindle_group_shutdown", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    ("spindle_group_leave", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    (
        "spindle_group_set_keys",
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p],
    ),
    ("spindle_group_fd", ctypes.c_int, [ctypes.c_void_p]),
    ("spindle_dispatch", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint]),
    ("spindle_group_destroy", None, [ctypes.c_void_p]),
    (
        "spindle_config_load",
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)],
    ),
    ("spindle_config_free", None, [ctypes.c_void_p]),
    (
        "spindle_group_setup_from_config_sized",
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.POINTER(GroupSetup),
            ctypes.c_size_t,
            ctypes.c_size_t,
        ],
    ),
    (
        "spindle_group_setup_from_env_sized",
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.POINTER(GroupSetup), ctypes.c_size_t, ctypes.c_size_t],
    ),
    ("spindle_group_setup_free_sized", None, [ctypes.POINTER(GroupSetup), ctypes.c_size_t]),
    ("spindle_log_set_sink", None, [LOG_SINK_FN, ctypes.c_void_p]),
    ("spindle_log_set_level", ctypes.c_int, [ctypes.c_int]),
    ("spindle_log_get_level", ctypes.c_int, []),
    (
        "spindle_log_parse_level",
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)],
    ),
]


def _candidates():
    """Where the library may be, in the order tried."""
    explicit = os.environ.get("SPINDLE_LIBRARY")
    if explicit:
        return [explicit]
    found = []
    try:
        # Written by `cmake --install`: the library's path relative to the
        # installed package, so a moved prefix still finds its own library.
        from . import _installed

        beside = os.path.normpath(
            os.path.join(os.path.dirname(__file__), _installed.LIBRARY_FROM_PACKAGE)
        )
        if os.path.exists(beside):
            found.append(beside)
    except ImportError:
        pass
    by_name = ctypes.util.find_library("spindle")
    if by_name:
        found.append(by_name)
    found.append(SONAME)
    return found


def _load():
    errors = []
    for candidate in _candidates():
        try:
            return ctypes.CDLL(candidate), candidate
        except OSError as e:
            errors.append(f"{candidate}: {e}")
    raise ImportError(
        "spindle: cannot load libspindle (set SPINDLE_LIBRARY to its path): "
        + "; ".join(errors)
    )


lib, path = _load()
for _name, _restype, _argtypes in _PROTOTYPES:
    _function = getattr(lib, _name)
    _function.restype = _restype
    _function.argtypes = _argtypes
