//! Headers of consumed messages, without librdkafka's per-message allocation when there are
//! none.
//!
//! librdkafka parses a consumed message's headers on first access, and a record of the current
//! format always carries a header count, even a count of zero: so `rd_kafka_message_headers`
//! allocates (and the task thread frees) a 512-byte parse buffer for every message, only to
//! find no headers: a real share of a sink task's time on header-less topics (see
//! docs/benchmark-journal.md).
//! [`headers`] first reads the unparsed header bytes librdkafka keeps beside the message and
//! skips the parse when they are a lone zero count.
//!
//! Those bytes live in librdkafka's private `rd_kafka_msg_t`, whose layout [`MsgPrefix`]
//! mirrors for exactly the librdkafka release the lock file pins ([`LAYOUT_VERSION`]). With any
//! other release linked, the peek is never made and every message takes librdkafka's own path;
//! `tests/kafka_headers.rs` fails on such an upgrade so the layout is checked again.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use rdkafka::bindings as rdsys;
use rdkafka::message::{BorrowedHeaders, BorrowedMessage, Message, OwnedMessage};

/// The librdkafka release (`rd_kafka_version()`) whose `rd_kafka_msg_t` [`MsgPrefix`] mirrors.
pub const LAYOUT_VERSION: c_int = 0x020c_01ff;

/// `RD_KAFKA_MSG_F_PRODUCER` (`src/rdkafka_msg.h`): the message is a producer's, whose union
/// holds timestamps, not header bytes.
const PRODUCER_FLAG: c_int = 0x40000;

/// The start of librdkafka 2.12.1's `rd_kafka_msg_t` (`src/rdkafka_msg.h`), up to the consumer
/// side of its union: the unparsed header bytes.
#[repr(C)]
struct MsgPrefix {
    /// `rkm_rkmessage`, documented to be the first field.
    message: rdsys::rd_kafka_message_t,
    /// `rkm_link` (a TAILQ entry: two pointers).
    link: [*mut c_void; 2],
    flags: c_int,
    timestamp_type: c_int,
    timestamp: i64,
    parsed_headers: *mut c_void,
    status: c_int,
    broker_id: i32,
    /// `rkm_u.consumer.binhdrs`: an `rd_kafkap_bytes_t` (length, then pointer).
    unparsed_headers_len: i32,
    unparsed_headers: *const u8,
}

/// A consumed message as librdkafka holds it: rdkafka's own, or one taken in a batch.
pub trait NativeMessage: Message<Headers = BorrowedHeaders> {
    /// librdkafka's message, alive as long as `self`.
    fn native(&self) -> *const rdsys::rd_kafka_message_t;
}

impl NativeMessage for BorrowedMessage<'_> {
    fn native(&self) -> *const rdsys::rd_kafka_message_t {
        self.ptr()
    }
}

impl NativeMessage for super::fetch_queues::Fetched<'_> {
    fn native(&self) -> *const rdsys::rd_kafka_message_t {
        self.ptr()
    }
}

/// A consumed message of any kind, with its headers read the cheapest way that kind allows.
pub trait ConsumedMessage: Message {
    /// The message's headers, or `None` when it has none.
    fn headers_fast(&self) -> Option<&Self::Headers>;
}

impl ConsumedMessage for BorrowedMessage<'_> {
    fn headers_fast(&self) -> Option<&BorrowedHeaders> {
        headers(self)
    }
}

impl ConsumedMessage for super::fetch_queues::Fetched<'_> {
    fn headers_fast(&self) -> Option<&BorrowedHeaders> {
        headers(self)
    }
}

/// A message kept by the runner (see `SinkConsumer::take_carried`): its headers were copied
/// out when it was detached.
impl ConsumedMessage for OwnedMessage {
    fn headers_fast(&self) -> Option<&Self::Headers> {
        self.headers()
    }
}

/// Whether the linked librdkafka is the one [`MsgPrefix`] mirrors.
pub fn layout_matches() -> bool {
    // A fact about the linked library, the same for every worker: computed once, never changed.
    static MATCHES: OnceLock<bool> = OnceLock::new();
    // SAFETY: a plain query of the library's version.
    *MATCHES.get_or_init(|| unsafe { rdsys::rd_kafka_version() } == LAYOUT_VERSION)
}

/// Whether `message` certainly has no headers, known without librdkafka's parse; `false` when
/// it may have some, when the layout is not known, or for a producer's message (a delivery
/// report), which keeps no header bytes.
pub fn certainly_none(message: &impl NativeMessage) -> bool {
    if !layout_matches() {
        return false;
    }
    let msg = message.native() as *const MsgPrefix;
    // SAFETY: a consumed message's `rd_kafka_message_t` is the first field of the
    // `rd_kafka_msg_t` that holds it (librdkafka casts between the two); the layout is that of
    // the linked release (checked above); the message, and the fetch buffer its header bytes
    // point into, live as long as `message` does. A length of 1 means one readable byte.
    // The flags and the parsed-headers pointer are read first: the union is the consumer's only
    // without the producer flag, and headers already parsed (or set by an interceptor) win, as
    // in librdkafka's own `rd_kafka_message_headers`.
    unsafe {
        if (*msg).flags & PRODUCER_FLAG != 0 || !(*msg).parsed_headers.is_null() {
            return false;
        }
        let len = (*msg).unparsed_headers_len;
        let data = (*msg).unparsed_headers;
        // A varint zero, the record format's "no headers"; older formats have no bytes at all.
        len <= 0 || (len == 1 && !data.is_null() && *data == 0)
    }
}

/// The headers of a consumed message, or `None` when it has none.
pub fn headers(message: &impl NativeMessage) -> Option<&BorrowedHeaders> {
    if certainly_none(message) {
        None
    } else {
        message.headers()
    }
}
