//! sparkafka's native fetch: consume assigned partitions with librdkafka straight into Arrow buffers.
//!
//! Runs inside Spark's Python workers, called by `sparkafka.source.native_fetch` (the only caller), which
//! keeps every decision (when a partition is done, stalls, data loss, retries) in Python and shared with the
//! pure-Python path. This module only does what costs per record there: a `Message` object, its key and
//! value `bytes`, and the copy of each into Arrow. Here no Python object is made per record: records are
//! copied from librdkafka's buffers into column buffers, each column goes to Python as one `bytes` (one bulk
//! copy per column), and Python wraps those as Arrow arrays without
//! another copy.
//!
//! Each assigned partition is read from its own queue (`rd_kafka_queue_get_partition`, not forwarded to the
//! consumer queue), so several partitions can be assigned at once and each still read alone, in offset
//! order: librdkafka fetches them all in one request per broker, and the partition read next has its first
//! records queued before its turn instead of waiting for a fetch of its own (`fetch.wait.max.ms` behind the
//! one in flight). librdkafka's queue bounds (`queued.max.messages.kbytes`) then hold per partition.
//!
//! The GIL is released while librdkafka is waited on and while records are copied.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::Mutex;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use rdkafka_sys as rd;
use rd::rd_kafka_resp_err_t as RespErr;
use rd::rd_kafka_timestamp_type_t as TsType;

create_exception!(sparkafka_native, KafkaError, PyException, "A librdkafka error: args are (code, text).");

/// librdkafka's log lines kept for Python to drain (`Reader.logs`); past this many, lines are counted only.
const MAX_LOG_LINES: usize = 1000;
/// Messages taken from librdkafka's queue per call, at most.
const QUEUE_BATCH: usize = 4096;
/// Messages taken by a fetch's first call, before it knows the records' size.
const FIRST_TAKE: usize = 64;

/// Log lines written by librdkafka's threads (through `log_cb`), read by Python after each call.
#[derive(Default)]
struct Logs {
    lines: Mutex<(Vec<(i32, String, String)>, u64)>,
}

unsafe extern "C" fn log_cb(rk: *const rd::rd_kafka_t, level: c_int, fac: *const c_char, buf: *const c_char) {
    let logs = rd::rd_kafka_opaque(rk) as *const Logs;
    if logs.is_null() {
        return;
    }
    let fac = CStr::from_ptr(fac).to_string_lossy().into_owned();
    let text = CStr::from_ptr(buf).to_string_lossy().into_owned();
    if let Ok(mut guard) = (*logs).lines.lock() {
        if guard.0.len() < MAX_LOG_LINES {
            guard.0.push((level, fac, text));
        } else {
            guard.1 += 1;
        }
    }
}

#[derive(Clone, Copy)]
struct Handle(*mut rd::rd_kafka_t);
// librdkafka handles and queues are thread-safe; the pointers only cross into `Python::detach`.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

#[derive(Clone, Copy)]
struct Queue(*mut rd::rd_kafka_queue_t);
unsafe impl Send for Queue {}
unsafe impl Sync for Queue {}

fn err_text(err: RespErr) -> String {
    unsafe { CStr::from_ptr(rd::rd_kafka_err2str(err)).to_string_lossy().into_owned() }
}

fn kafka_error(err: RespErr) -> PyErr {
    KafkaError::new_err((err as i32, err_text(err)))
}

/// `Ok(())` for no error, else librdkafka's error as a Python `KafkaError`.
fn check(err: RespErr) -> PyResult<()> {
    if err == RespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(kafka_error(err))
    }
}

unsafe fn bytes_at<'a>(data: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(data as *const u8, len)
    }
}

/// An Arrow validity bitmap (LSB first, 1 = valid).
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    len: usize,
    nulls: usize,
}

impl Bits {
    fn push(&mut self, valid: bool) {
        if self.len % 8 == 0 {
            self.bytes.push(0);
        }
        if valid {
            self.bytes[self.len / 8] |= 1 << (self.len % 8);
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }
}

/// A variable-width Arrow column (binary or string): offsets, data, validity.
struct VarColumn {
    offsets: Vec<i64>,
    data: Vec<u8>,
    valid: Bits,
}

impl VarColumn {
    fn new() -> Self {
        VarColumn { offsets: vec![0], data: Vec::new(), valid: Bits::default() }
    }

    fn push(&mut self, value: Option<&[u8]>) {
        if let Some(v) = value {
            self.data.extend_from_slice(v);
        }
        self.valid.push(value.is_some());
        self.offsets.push(self.data.len() as i64);
    }
}

/// What one `fetch` read: the columns of the records before `end`, and what else it saw.
struct Chunk {
    rows: usize,
    keys: VarColumn,
    values: VarColumn,
    offsets: Vec<i64>,
    timestamps: Vec<i64>,
    timestamp_valid: Bits,
    types: Vec<i32>,
    header_offsets: Vec<i32>,
    header_valid: Bits,
    header_keys: VarColumn,
    header_values: VarColumn,
    last_offset: i64,
    reached_end: bool,
    events: Vec<(i32, String, Option<String>, i32, i64)>,
}

impl Chunk {
    fn new() -> Self {
        Chunk {
            rows: 0,
            keys: VarColumn::new(),
            values: VarColumn::new(),
            offsets: Vec::new(),
            timestamps: Vec::new(),
            timestamp_valid: Bits::default(),
            types: Vec::new(),
            header_offsets: vec![0],
            header_valid: Bits::default(),
            header_keys: VarColumn::new(),
            header_values: VarColumn::new(),
            last_offset: -1,
            reached_end: false,
            events: Vec::new(),
        }
    }

    fn bytes(&self) -> usize {
        self.keys.data.len() + self.values.data.len() + self.header_keys.data.len() + self.header_values.data.len()
    }

    /// Take one message: an event, a record of another partition (skipped), or a record to keep.
    unsafe fn take(&mut self, m: *mut rd::rd_kafka_message_t, topic: &[u8], partition: i32, end: i64, headers: bool) {
        let msg = &*m;
        let topic_name =
            if msg.rkt.is_null() { None } else { Some(CStr::from_ptr(rd::rd_kafka_topic_name(msg.rkt))) };
        if msg.err != RespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
            let text = if msg.payload.is_null() {
                err_text(msg.err)
            } else {
                String::from_utf8_lossy(bytes_at(msg.payload, msg.len)).into_owned()
            };
            let topic = topic_name.map(|t| t.to_string_lossy().into_owned());
            self.events.push((msg.err as i32, text, topic, msg.partition, msg.offset));
            return;
        }
        // librdkafka drops what it fetched for an earlier assignment; this guards the columns all the same.
        if msg.partition != partition || topic_name.map(|t| t.to_bytes()) != Some(topic) {
            return;
        }
        self.last_offset = msg.offset;
        if msg.offset >= end {
            self.reached_end = true;
            return;
        }
        if msg.offset == end - 1 {
            self.reached_end = true;
        }
        self.rows += 1;
        self.keys.push(if msg.key.is_null() { None } else { Some(bytes_at(msg.key, msg.key_len)) });
        self.values.push(if msg.payload.is_null() { None } else { Some(bytes_at(msg.payload, msg.len)) });
        self.offsets.push(msg.offset);
        let mut kind = TsType::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        let ms = rd::rd_kafka_message_timestamp(m, &mut kind);
        // Kafka's TimestampType ids, as Spark's connector gives them: 0 create time, 1 log append time.
        let (stamp, valid, type_id) = match kind {
            TsType::RD_KAFKA_TIMESTAMP_CREATE_TIME => (ms.wrapping_mul(1000), true, 0),
            TsType::RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME => (ms.wrapping_mul(1000), true, 1),
            TsType::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE => (0, false, -1),
        };
        self.timestamps.push(stamp);
        self.timestamp_valid.push(valid);
        self.types.push(type_id);
        if headers {
            self.take_headers(m);
        }
    }

    /// A record's headers: null when it has none (as Spark's connector gives), else its (key, value) list.
    unsafe fn take_headers(&mut self, m: *mut rd::rd_kafka_message_t) {
        let mut hdrs: *mut rd::rd_kafka_headers_t = ptr::null_mut();
        let mut count = 0;
        if rd::rd_kafka_message_headers(m, &mut hdrs) == RespErr::RD_KAFKA_RESP_ERR_NO_ERROR && !hdrs.is_null() {
            loop {
                let (mut name, mut value, mut size): (*const c_char, *const c_void, usize) =
                    (ptr::null(), ptr::null(), 0);
                if rd::rd_kafka_header_get_all(hdrs, count, &mut name, &mut value, &mut size)
                    != RespErr::RD_KAFKA_RESP_ERR_NO_ERROR
                {
                    break;
                }
                // Header keys are strings: invalid UTF-8 is replaced, as Java's String(bytes, UTF_8) does.
                let key = String::from_utf8_lossy(CStr::from_ptr(name).to_bytes());
                self.header_keys.push(Some(key.as_bytes()));
                self.header_values.push(if value.is_null() { None } else { Some(bytes_at(value, size)) });
                count += 1;
            }
        }
        self.header_valid.push(count > 0);
        let last = *self.header_offsets.last().unwrap_or(&0);
        self.header_offsets.push(last + count as i32);
    }
}

fn int32_offsets(offsets: &[i64], what: &str) -> PyResult<Vec<u8>> {
    let mut out = Vec::with_capacity(offsets.len() * 4);
    for &o in offsets {
        let o = i32::try_from(o).map_err(|_| {
            PyValueError::new_err(format!("the {what} of one batch exceed 2 GiB (lower queued.max.messages.kbytes)"))
        })?;
        out.extend_from_slice(&o.to_le_bytes());
    }
    Ok(out)
}

fn le_bytes<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&to(v));
    }
    out
}

fn bitmap<'py>(py: Python<'py>, bits: &Bits) -> Option<Bound<'py, PyBytes>> {
    if bits.nulls == 0 {
        None
    } else {
        Some(PyBytes::new(py, &bits.bytes))
    }
}

fn var_column<'py>(py: Python<'py>, col: &VarColumn, what: &str) -> PyResult<Bound<'py, PyTuple>> {
    let offsets = int32_offsets(&col.offsets, what)?;
    PyTuple::new(
        py,
        [
            bitmap(py, &col.valid).into_pyobject(py)?.into_any(),
            PyBytes::new(py, &offsets).into_any(),
            PyBytes::new(py, &col.data).into_any(),
        ],
    )
}

impl Chunk {
    /// `(rows, last_offset, reached_end, events, columns)`; columns are `(validity, offsets, data)` for
    /// keys, values, header keys and header values, and buffers for the fixed-width ones.
    fn into_python<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let keys = var_column(py, &self.keys, "keys")?;
        let values = var_column(py, &self.values, "values")?;
        let header_keys = var_column(py, &self.header_keys, "header keys")?;
        let header_values = var_column(py, &self.header_values, "header values")?;
        let offsets = PyBytes::new(py, &le_bytes(&self.offsets, i64::to_le_bytes));
        let timestamps = PyBytes::new(py, &le_bytes(&self.timestamps, i64::to_le_bytes));
        let types = PyBytes::new(py, &le_bytes(&self.types, i32::to_le_bytes));
        let header_offsets = PyBytes::new(py, &le_bytes(&self.header_offsets, i32::to_le_bytes));
        let columns = PyTuple::new(
            py,
            [
                keys.into_any(),
                values.into_any(),
                offsets.into_any(),
                PyTuple::new(py, [bitmap(py, &self.timestamp_valid).into_pyobject(py)?.into_any(), timestamps.into_any()])?
                    .into_any(),
                types.into_any(),
                PyTuple::new(
                    py,
                    [
                        bitmap(py, &self.header_valid).into_pyobject(py)?.into_any(),
                        header_offsets.into_any(),
                        header_keys.into_any(),
                        header_values.into_any(),
                    ],
                )?
                .into_any(),
            ],
        )?;
        let events = PyList::empty(py);
        for e in self.events {
            events.append(e)?;
        }
        (self.rows, self.last_offset, self.reached_end, events, columns).into_pyobject(py)
    }
}

/// A consumer used only with `assign` and explicit positions: no group membership, no commits.
#[pyclass(module = "sparkafka_native")]
struct Reader {
    rk: Handle,
    /// The consumer queue: only consumer-level events reach it (every assigned partition has its own queue).
    queue: Queue,
    /// The queue of each assigned partition, by (topic, partition).
    parts: Mutex<HashMap<(String, i32), Queue>>,
    logs: Box<Logs>,
    closed: bool,
}

/// Consume and drop what `queue` holds now (a removed partition's prefetched records, outdated either way).
unsafe fn drain(queue: Queue) {
    let mut buf: Vec<*mut rd::rd_kafka_message_t> = vec![ptr::null_mut(); QUEUE_BATCH];
    loop {
        let got = rd::rd_kafka_consume_batch_queue(queue.0, 0, buf.as_mut_ptr(), QUEUE_BATCH);
        if got <= 0 {
            break;
        }
        for &m in &buf[..got as usize] {
            rd::rd_kafka_message_destroy(m);
        }
    }
}

/// `Ok(())` for no error, else the error as a Python `KafkaError` (the error object is destroyed).
unsafe fn check_error(error: *mut rd::rd_kafka_error_t) -> PyResult<()> {
    if error.is_null() {
        return Ok(());
    }
    let code = rd::rd_kafka_error_code(error);
    let text = CStr::from_ptr(rd::rd_kafka_error_string(error)).to_string_lossy().into_owned();
    rd::rd_kafka_error_destroy(error);
    Err(KafkaError::new_err((code as i32, text)))
}

impl Reader {
    fn open(&self) -> PyResult<()> {
        if self.closed {
            Err(PyValueError::new_err("the reader is closed"))
        } else {
            Ok(())
        }
    }

    fn one_partition(topic: &str, partition: i32, offset: i64) -> PyResult<*mut rd::rd_kafka_topic_partition_list_t> {
        let topic = CString::new(topic)?;
        unsafe {
            let list = rd::rd_kafka_topic_partition_list_new(1);
            let tp = rd::rd_kafka_topic_partition_list_add(list, topic.as_ptr(), partition);
            (*tp).offset = offset;
            Ok(list)
        }
    }
}

#[pymethods]
impl Reader {
    /// A consumer with librdkafka settings `conf` (strings). Raises ValueError((key, reason)) for a setting
    /// this build does not take (TLS, SASL PLAIN and SCRAM are built in, GSSAPI is not); the reason never
    /// repeats the value.
    #[new]
    fn new(conf: &Bound<'_, PyDict>) -> PyResult<Self> {
        let mut errstr = [0 as c_char; 512];
        // Every setting as C strings first, so that nothing below returns early holding the conf.
        let mut settings: Vec<(String, CString, CString)> = Vec::new();
        for (k, v) in conf.iter() {
            let key: String = k.extract()?;
            let refuse = |reason: &'static str| PyValueError::new_err((key.clone(), reason));
            let value: String = v.extract().map_err(|_| refuse("not a string"))?;
            let ck = CString::new(key.as_str()).map_err(|_| refuse("has a NUL character"))?;
            let cv = CString::new(value).map_err(|_| refuse("has a NUL character"))?;
            settings.push((key, ck, cv));
        }
        // OpenSSL built in (feature vendored-openssl, the wheels' build) looks for CA certificates under its
        // own build-time directory, which no distribution uses. librdkafka's `probe` takes the first of the
        // standard system locations that exists (/etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/
        // ca-bundle.crt, ...), as confluent-kafka's wheels, whose OpenSSL is built in too, do by default.
        // Only when the user names no CA file; `ssl.ca.pem` set by the user still wins over the probe.
        if cfg!(feature = "vendored-openssl") && !settings.iter().any(|(k, _, _)| k == "ssl.ca.location") {
            let probe = |s: &str| CString::new(s).expect("no NUL");
            settings.insert(0, ("ssl.ca.location".to_string(), probe("ssl.ca.location"), probe("probe")));
        }
        unsafe {
            let c = rd::rd_kafka_conf_new();
            for (key, ck, cv) in settings {
                let res = rd::rd_kafka_conf_set(c, ck.as_ptr(), cv.as_ptr(), errstr.as_mut_ptr(), errstr.len());
                if res != rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
                    rd::rd_kafka_conf_destroy(c);
                    let reason = match res {
                        rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_UNKNOWN => "unknown to this build",
                        _ => "not supported by this build or invalid",
                    };
                    return Err(PyValueError::new_err((key, reason)));
                }
            }
            let logs = Box::new(Logs::default());
            rd::rd_kafka_conf_set_opaque(c, &*logs as *const Logs as *mut c_void);
            rd::rd_kafka_conf_set_log_cb(c, Some(log_cb));
            let rk = rd::rd_kafka_new(rd::rd_kafka_type_t::RD_KAFKA_CONSUMER, c, errstr.as_mut_ptr(), errstr.len());
            if rk.is_null() {
                rd::rd_kafka_conf_destroy(c);
                let reason = CStr::from_ptr(errstr.as_ptr()).to_string_lossy().into_owned();
                return Err(PyValueError::new_err(("", reason)));
            }
            rd::rd_kafka_poll_set_consumer(rk);
            let queue = rd::rd_kafka_queue_get_consumer(rk);
            if queue.is_null() {
                // No consumer group (an empty group.id): librdkafka has no consumer queue to read from.
                rd::rd_kafka_destroy(rk);
                return Err(PyValueError::new_err(("group.id", "must not be empty")));
            }
            Ok(Reader { rk: Handle(rk), queue: Queue(queue), parts: Mutex::new(HashMap::new()), logs, closed: false })
        }
    }

    /// Add `partition` of `topic` to the assignment, read from `offset` into its own queue (`fetch`); the
    /// partitions assigned already go on being fetched. Assigning an assigned partition again restarts it
    /// at `offset`.
    fn assign(&self, topic: &str, partition: i32, offset: i64) -> PyResult<()> {
        self.open()?;
        self.release(topic, partition)?;
        let name = CString::new(topic)?;
        let list = Self::one_partition(topic, partition, offset)?;
        unsafe {
            let q = rd::rd_kafka_queue_get_partition(self.rk.0, name.as_ptr(), partition);
            if q.is_null() {
                rd::rd_kafka_topic_partition_list_destroy(list);
                return Err(PyValueError::new_err(format!("no queue for {topic}-{partition}")));
            }
            // Before the assignment starts the fetcher: an application's forward (none) is kept by
            // librdkafka's fetch start, which otherwise forwards the partition to the consumer queue.
            rd::rd_kafka_queue_forward(q, ptr::null_mut());
            drain(Queue(q)); // records of an earlier assignment of the partition, if any were left
            let error = rd::rd_kafka_incremental_assign(self.rk.0, list);
            rd::rd_kafka_topic_partition_list_destroy(list);
            if let Err(e) = check_error(error) {
                rd::rd_kafka_queue_destroy(q);
                return Err(e);
            }
            self.parts.lock().expect("not poisoned").insert((topic.to_string(), partition), Queue(q));
        }
        Ok(())
    }

    /// Remove `partition` of `topic` from the assignment and drop what it prefetched (nothing if it is not
    /// assigned). librdkafka stops the partition's fetcher asynchronously: a response already in flight may
    /// still queue records after the drain (outdated: dropped when the partition is next assigned).
    fn release(&self, topic: &str, partition: i32) -> PyResult<()> {
        self.open()?;
        let q = self.parts.lock().expect("not poisoned").remove(&(topic.to_string(), partition));
        let Some(q) = q else { return Ok(()) };
        let list = Self::one_partition(topic, partition, -1001)?;
        unsafe {
            let error = rd::rd_kafka_incremental_unassign(self.rk.0, list);
            rd::rd_kafka_topic_partition_list_destroy(list);
            drain(q);
            rd::rd_kafka_queue_destroy(q.0);
            check_error(error)
        }
    }

    /// Remove every partition from the assignment and drop what they prefetched.
    fn unassign(&self) -> PyResult<()> {
        self.open()?;
        let err = unsafe { rd::rd_kafka_assign(self.rk.0, ptr::null()) };
        let parts: Vec<Queue> = self.parts.lock().expect("not poisoned").drain().map(|(_, q)| q).collect();
        for q in parts {
            unsafe {
                drain(q);
                rd::rd_kafka_queue_destroy(q.0);
            }
        }
        check(err)
    }

    /// The consumer's position in the partition (the next offset it returns), or a negative "invalid".
    fn position(&self, topic: &str, partition: i32) -> PyResult<i64> {
        self.open()?;
        let list = Self::one_partition(topic, partition, -1001)?;
        unsafe {
            let err = rd::rd_kafka_position(self.rk.0, list);
            let offset = (*(*list).elems).offset;
            rd::rd_kafka_topic_partition_list_destroy(list);
            check(err)?;
            Ok(offset)
        }
    }

    /// The partition's (log start, high watermark), asked of its leader. Raises KafkaError.
    fn watermarks(&self, py: Python<'_>, topic: &str, partition: i32, timeout_ms: i32) -> PyResult<(i64, i64)> {
        self.open()?;
        let (rk, topic) = (self.rk, CString::new(topic)?);
        let (err, low, high) = py.detach(move || unsafe {
            let rk = rk; // the whole Send wrapper, not its raw field (closures capture fields)
            let (mut low, mut high) = (-1i64, -1i64);
            let err = rd::rd_kafka_query_watermark_offsets(rk.0, topic.as_ptr(), partition, &mut low, &mut high, timeout_ms);
            (err, low, high)
        });
        check(err)?;
        Ok((low, high))
    }

    /// Fetch the metadata of `topic` now (before assigning it: librdkafka otherwise waits for its timer).
    fn learn_topic(&self, py: Python<'_>, topic: &str, timeout_ms: i32) -> PyResult<()> {
        self.open()?;
        let (rk, topic) = (self.rk, CString::new(topic)?);
        let err = py.detach(move || unsafe {
            let rk = rk; // the whole Send wrapper
            let rkt = rd::rd_kafka_topic_new(rk.0, topic.as_ptr(), ptr::null_mut());
            if rkt.is_null() {
                return rd::rd_kafka_last_error();
            }
            let mut md: *const rd::rd_kafka_metadata = ptr::null();
            let err = rd::rd_kafka_metadata(rk.0, 0, rkt, &mut md, timeout_ms);
            if !md.is_null() {
                rd::rd_kafka_metadata_destroy(md);
            }
            rd::rd_kafka_topic_destroy(rkt);
            err
        });
        check(err)
    }

    /// Consume the assigned partition into Arrow buffers: up to `max_rows` records before `end`, stopping
    /// early at `end`, at an event (an error or end of partition), at about `max_bytes` of keys, values
    /// and headers (by the mean record size: a record larger than the rest may pass it), or when nothing
    /// arrives within `timeout_ms`. Consumer-level events queued by then (no partition's) come with it.
    /// Returns what `Chunk::into_python` describes; ValueError when the partition is not assigned.
    #[pyo3(signature = (topic, partition, end, max_rows, max_bytes, timeout_ms, include_headers))]
    #[allow(clippy::too_many_arguments)]
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        partition: i32,
        end: i64,
        max_rows: usize,
        max_bytes: usize,
        timeout_ms: i32,
        include_headers: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.open()?;
        let consumer = self.queue;
        let Some(queue) = self.parts.lock().expect("not poisoned").get(&(topic.to_string(), partition)).copied()
        else {
            return Err(PyValueError::new_err(format!("{topic}-{partition} is not assigned")));
        };
        let topic = topic.as_bytes().to_vec();
        let chunk = py.detach(move || unsafe {
            let (queue, consumer) = (queue, consumer); // the whole Send wrappers
            let mut chunk = Chunk::new();
            let mut buf: Vec<*mut rd::rd_kafka_message_t> = vec![ptr::null_mut(); QUEUE_BATCH];
            loop {
                let bytes = chunk.bytes();
                if chunk.rows >= max_rows || bytes >= max_bytes {
                    break;
                }
                // Messages taken off the queue are kept, so take about as many as fit in `max_bytes` at
                // the mean record size so far (a first small take measures it).
                let fit = match chunk.rows {
                    0 => FIRST_TAKE,
                    rows => (max_bytes - bytes) / (bytes / rows).max(1) + 1,
                };
                let room = QUEUE_BATCH.min(max_rows - chunk.rows).min(fit);
                // What is queued now; else wait for the first message (consume_batch_queue alone would wait
                // out the timeout whenever fewer than `room` messages are left, as at every range's end).
                let mut got = rd::rd_kafka_consume_batch_queue(queue.0, 0, buf.as_mut_ptr(), room);
                if got == 0 {
                    got = rd::rd_kafka_consume_batch_queue(queue.0, timeout_ms, buf.as_mut_ptr(), 1);
                }
                if got <= 0 {
                    if got < 0 {
                        let err = rd::rd_kafka_last_error();
                        chunk.events.push((err as i32, err_text(err), None, partition, -1));
                    }
                    break;
                }
                for &m in &buf[..got as usize] {
                    chunk.take(m, &topic, partition, end, include_headers);
                    rd::rd_kafka_message_destroy(m);
                }
                if chunk.reached_end || !chunk.events.is_empty() {
                    break;
                }
            }
            // Consumer-level events (a refused group lookup, brokers down): nothing else reaches that queue.
            let got = rd::rd_kafka_consume_batch_queue(consumer.0, 0, buf.as_mut_ptr(), QUEUE_BATCH);
            for &m in &buf[..got.max(0) as usize] {
                if (*m).err != RespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
                    chunk.take(m, &topic, partition, end, include_headers);
                }
                rd::rd_kafka_message_destroy(m);
            }
            chunk
        });
        chunk.into_python(py)
    }

    /// librdkafka's log lines since the last call, as (syslog level, facility, text), and how many were
    /// dropped past the buffer's bound.
    fn logs(&self) -> (Vec<(i32, String, String)>, u64) {
        match self.logs.lines.lock() {
            Ok(mut guard) => (std::mem::take(&mut guard.0), std::mem::take(&mut guard.1)),
            Err(_) => (Vec::new(), 0),
        }
    }

    fn close(&mut self, py: Python<'_>) {
        if self.closed {
            return;
        }
        self.closed = true;
        let (rk, queue) = (self.rk, self.queue);
        let parts = self.take_parts();
        py.detach(move || {
            let (rk, queue, parts) = (rk, queue, parts); // the whole Send wrappers
            unsafe { destroy(rk, queue, parts) }
        });
    }
}

impl Reader {
    fn take_parts(&self) -> Vec<Queue> {
        match self.parts.lock() {
            Ok(mut parts) => parts.drain().map(|(_, q)| q).collect(),
            Err(_) => Vec::new(),
        }
    }
}

unsafe fn destroy(rk: Handle, queue: Queue, parts: Vec<Queue>) {
    for q in parts {
        rd::rd_kafka_queue_destroy(q.0);
    }
    rd::rd_kafka_queue_destroy(queue.0);
    rd::rd_kafka_consumer_close(rk.0);
    rd::rd_kafka_destroy(rk.0);
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.closed {
            self.closed = true;
            let parts = self.take_parts();
            unsafe { destroy(self.rk, self.queue, parts) };
        }
    }
}

/// The version of the librdkafka built in, e.g. "2.12.1".
#[pyfunction]
fn librdkafka_version() -> String {
    unsafe { CStr::from_ptr(rd::rd_kafka_version_str()).to_string_lossy().into_owned() }
}

/// Where TLS comes from: "built in" (OpenSSL compiled into the extension, feature vendored-openssl) or
/// "system" (the system's libssl, linked dynamically).
#[pyfunction]
fn openssl_linkage() -> &'static str {
    if cfg!(feature = "vendored-openssl") {
        "built in"
    } else {
        "system"
    }
}

#[pymodule]
fn sparkafka_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Reader>()?;
    m.add_function(wrap_pyfunction!(librdkafka_version, m)?)?;
    m.add_function(wrap_pyfunction!(openssl_linkage, m)?)?;
    m.add("KafkaError", m.py().get_type::<KafkaError>())?;
    Ok(())
}
