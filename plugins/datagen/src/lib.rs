//! `datagen`: a source connector that generates synthetic records, deterministically.
//!
//! Record number `g` (counting from 0 across the whole connector) has the key `g` (text) and a
//! JSON value `{"id":g,"task":i,"seq":s,"payload":"..."}` padded to about `value.size` bytes with
//! characters drawn from a generator seeded by `seed` and `g`, so two runs with the same config
//! produce the same records. Task `i` of `n` owns the ids `g = s * n + i`; its source partition
//! is `{"task":i,"tasks":n}` and its offset `{"seq":s}`, so a restarted task continues after the
//! last record Kafka acknowledged.

use std::time::Instant;

use wasm_connect_sdk::{
    Config, ConfigDef, ConfigError, ConfigType, Connector, DataRef, Result, SourceBatch,
    SourceConnector, SourceRecordRef, SourceTask, Spec, export_source_connector, json,
};

const TASK_INDEX: &str = "datagen.task.index";
const TASK_COUNT: &str = "datagen.task.count";

/// The connector: splits the count and rate evenly across tasks.
pub struct Datagen;

impl Connector for Datagen {
    fn create(_config: &Config) -> Result<Self> {
        Ok(Self)
    }

    fn spec() -> Spec {
        Spec::new(
            "datagen",
            env!("CARGO_PKG_VERSION"),
            "Generates synthetic records (sequence keys, JSON values) at a configurable rate and count",
        )
        .config(ConfigDef::new("topic", ConfigType::String, "Topic to write the records to.").required())
        .config(
            ConfigDef::new(
                "count",
                ConfigType::Long,
                "Total number of records to generate across all tasks; -1 for no end.",
            )
            .default(-1),
        )
        .config(
            ConfigDef::new(
                "rate",
                ConfigType::Double,
                "Records per second across all tasks; 0 for as fast as the worker takes them.",
            )
            .default(0),
        )
        .config(
            ConfigDef::new(
                "value.size",
                ConfigType::Int,
                "Approximate size in bytes of each JSON value (the payload is padded to reach it).",
            )
            .default(100),
        )
        .config(
            ConfigDef::new("key.type", ConfigType::String, "`sequence`: the record id as text; `none`: null keys.")
                .default("sequence")
                .allowed(&["sequence", "none"]),
        )
        .config(
            ConfigDef::new("seed", ConfigType::Long, "Seed of the payload generator; same seed, same records.")
                .default(0),
        )
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        match Settings::from_config(config) {
            Ok(_) => Vec::new(),
            Err(e) => vec![e],
        }
    }

    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        let max_tasks = max_tasks.max(1);
        Ok((0..max_tasks)
            .map(|i| {
                config
                    .clone()
                    .with(TASK_INDEX, i.to_string())
                    .with(TASK_COUNT, max_tasks.to_string())
            })
            .collect())
    }
}

impl SourceConnector for Datagen {
    type Task = DatagenTask;
}

/// The connector-level settings, checked once.
struct Settings {
    count: i64,
    rate: f64,
    value_size: usize,
    sequence_keys: bool,
    seed: u64,
}

impl Settings {
    fn from_config(config: &Config) -> std::result::Result<Self, ConfigError> {
        let count = config.parse_or::<i64>("count", -1)?;
        if count < -1 {
            return Err(ConfigError::new(
                "count",
                "must be -1 (no end) or at least 0",
            ));
        }
        let rate = config.parse_or::<f64>("rate", 0.0)?;
        if !rate.is_finite() || rate < 0.0 {
            return Err(ConfigError::new("rate", "must be a finite number >= 0"));
        }
        let value_size = config.parse_or::<usize>("value.size", 100)?;
        if value_size > 16 * 1024 * 1024 {
            return Err(ConfigError::new("value.size", "must be at most 16 MiB"));
        }
        let key_type = config.string_or("key.type", "sequence");
        let sequence_keys = match key_type.as_str() {
            "sequence" => true,
            "none" => false,
            other => {
                return Err(ConfigError::new(
                    "key.type",
                    format!("must be `sequence` or `none`, got {other:?}"),
                ));
            }
        };
        let seed = config.parse_or::<i64>("seed", 0)? as u64;
        Ok(Self {
            count,
            rate,
            value_size,
            sequence_keys,
            seed,
        })
    }
}

/// One task: generates the ids `s * tasks + index` for `s = 0, 1, ...`.
pub struct DatagenTask {
    settings: Settings,
    index: u64,
    tasks: u64,
    /// Records this task generates in all; `None` for no end.
    quota: Option<u64>,
    /// The next sequence number to generate.
    next_seq: u64,
    /// Records per second for this task (0: unthrottled).
    rate: f64,
    started: Instant,
    generated_since_start: u64,
    /// The source partition as JSON text, serialised once: it is the same for every record.
    partition: String,
}

impl SourceTask for DatagenTask {
    fn create(config: Config) -> Result<Self> {
        let settings = Settings::from_config(&config)?;
        let index = config.parse::<u64>(TASK_INDEX)?;
        let tasks = config.parse::<u64>(TASK_COUNT)?.max(1);
        let quota = u64::try_from(settings.count)
            .ok()
            .map(|count| count / tasks + u64::from(index < count % tasks));
        let partition = json!({"task": index, "tasks": tasks});
        let stored = wasm_connect_sdk::read_offsets(std::slice::from_ref(&partition));
        let next_seq = stored
            .first()
            .and_then(|o| o.as_ref())
            .and_then(|o| o["seq"].as_u64())
            .map_or(0, |last| last + 1);
        let rate = settings.rate / tasks as f64;
        Ok(Self {
            settings,
            index,
            tasks,
            quota,
            next_seq,
            rate,
            started: Instant::now(),
            generated_since_start: 0,
            partition: partition.to_string(),
        })
    }

    fn poll_into(&mut self, max_records: u32, batch: &mut SourceBatch) -> Result<()> {
        let mut n = u64::from(max_records);
        if let Some(quota) = self.quota {
            n = n.min(quota.saturating_sub(self.next_seq));
        }
        if self.rate > 0.0 {
            let due = (self.started.elapsed().as_secs_f64() * self.rate) as u64;
            n = n.min(due.saturating_sub(self.generated_since_start));
        }
        // Each record is built in these buffers and copied into the batch: this runs per
        // record, and in wasm an allocation per field cost more than generating the value.
        let mut value = String::with_capacity(self.settings.value_size.max(80));
        let mut offset = String::with_capacity(32);
        let task = Counter::new(self.index, 0);
        let mut seq = Counter::new(self.next_seq, 1);
        let mut id = Counter::new(self.next_seq * self.tasks + self.index, self.tasks);
        for _ in 0..n {
            value.clear();
            write_value_json(
                &mut value,
                self.next_seq * self.tasks + self.index,
                [id.text(), task.text(), seq.text()],
                self.settings.seed,
                self.settings.value_size,
            );
            offset.clear();
            offset.push_str("{\"seq\":");
            push_ascii(&mut offset, seq.text());
            offset.push('}');
            let mut record = SourceRecordRef::new(&self.partition, &offset, DataRef::Json(&value));
            if self.settings.sequence_keys {
                record = record.with_key(DataRef::Text(id.as_str()));
            }
            batch.push_ref(record)?;
            self.next_seq += 1;
            self.generated_since_start += 1;
            seq.advance();
            id.advance();
        }
        Ok(())
    }
}

/// The JSON value of record `id`, padded with generated characters to about `size` bytes.
pub fn value_json(id: u64, task: u64, seq: u64, seed: u64, size: usize) -> String {
    let mut value = String::with_capacity(size.max(80));
    let [id_text, task_text, seq_text] = [id, task, seq].map(|n| Counter::new(n, 0));
    write_value_json(
        &mut value,
        id,
        [id_text.text(), task_text.text(), seq_text.text()],
        seed,
        size,
    );
    value
}

/// The payload's characters: one for each 6-bit group of a generated word.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The two characters of each 12-bit group: `ALPHABET` of its low six bits, then of its high.
const PAIRS: [[u8; 2]; 4096] = {
    let mut pairs = [[0; 2]; 4096];
    let mut i = 0;
    while i < pairs.len() {
        pairs[i] = [ALPHABET[i & 63], ALPHABET[i >> 6]];
        i += 1;
    }
    pairs
};

/// [`value_json`], appended to `value`, which is empty; `texts` are the id, task and sequence
/// number in decimal.
fn write_value_json(value: &mut String, id: u64, texts: [&[u8]; 3], seed: u64, size: usize) {
    let [id_text, task_text, seq_text] = texts;
    value.push_str("{\"id\":");
    push_ascii(value, id_text);
    value.push_str(",\"task\":");
    push_ascii(value, task_text);
    value.push_str(",\"seq\":");
    push_ascii(value, seq_text);
    value.push_str(",\"payload\":\"");
    // Mix the id first: nearby ids must not give overlapping generator streams.
    let mut mixed = id;
    let mut state = seed ^ splitmix64(&mut mixed);
    let start = value.len();
    let end = size.saturating_sub(2).max(start);
    // SAFETY: only bytes of `ALPHABET`, all ASCII, are written, so the string stays UTF-8.
    // (Pushing chars one by one re-checked the capacity and re-read the length for each, in
    // wasm, which was most of a record's generation.)
    let bytes = unsafe { value.as_mut_vec() };
    bytes.resize(end, 0);
    // Ten characters from each generated word, its low 6-bit groups first: two at a time from
    // each 12-bit group, through `PAIRS` (half the lookups, which were most of the payload's
    // cost in wasm).
    let mut chunks = bytes[start..].chunks_exact_mut(10);
    for chunk in &mut chunks {
        let bits = splitmix64(&mut state);
        for (j, pair) in chunk.chunks_exact_mut(2).enumerate() {
            pair.copy_from_slice(&PAIRS[((bits >> (12 * j)) & 4095) as usize]);
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let bits = splitmix64(&mut state);
        for (i, byte) in rest.iter_mut().enumerate() {
            *byte = ALPHABET[((bits >> (6 * i)) & 63) as usize];
        }
    }
    value.push_str("\"}");
}

/// Append the digits of a [`Counter`].
fn push_ascii(out: &mut String, digits: &[u8]) {
    // Digits only ever come from `Counter`, which writes ASCII digits alone.
    debug_assert!(digits.is_ascii());
    // SAFETY: ASCII bytes keep the string UTF-8.
    unsafe { out.as_mut_vec() }.extend_from_slice(digits);
}

/// A number kept as decimal text and advanced by a fixed step: consecutive records' ids and
/// sequence numbers are written without converting each (in wasm, that conversion was a
/// quarter of the plugin's time per record, even with [`div10`]).
struct Counter {
    /// The digits, right-aligned; `u64::MAX` has 20, and a few more leave room for carries.
    digits: [u8; 24],
    start: usize,
    /// The step's digits, least significant first.
    step: [u8; 20],
    step_len: usize,
}

impl Counter {
    fn new(n: u64, step: u64) -> Self {
        let mut counter = Counter {
            digits: [b'0'; 24],
            start: 24,
            step: [0; 20],
            step_len: 0,
        };
        counter.start = write_decimal(n, &mut counter.digits);
        let mut rest = step;
        while rest > 0 {
            let tenth = rest / 10;
            counter.step[counter.step_len] = (rest - tenth * 10) as u8;
            counter.step_len += 1;
            rest = tenth;
        }
        counter
    }

    fn text(&self) -> &[u8] {
        &self.digits[self.start..]
    }

    fn as_str(&self) -> &str {
        // A checked conversion was a twentieth of the plugin's time per record (profiled).
        debug_assert!(self.text().is_ascii());
        // SAFETY: only ASCII digits are ever written (see `new` and `advance`).
        unsafe { std::str::from_utf8_unchecked(self.text()) }
    }

    /// Add the step, digit by digit with a carry (no division: a digit sum is at most 19).
    fn advance(&mut self) {
        let mut carry = 0;
        let mut i = self.digits.len();
        let mut k = 0;
        while (k < self.step_len || carry > 0) && i > 0 {
            i -= 1;
            if i < self.start {
                self.start = i;
            }
            let step = if k < self.step_len { self.step[k] } else { 0 };
            let mut digit = self.digits[i] - b'0' + step + carry;
            carry = u8::from(digit >= 10);
            if carry > 0 {
                digit -= 10;
            }
            self.digits[i] = b'0' + digit;
            k += 1;
        }
    }
}

/// Write `n` in decimal (what `{n}` formats to, without the formatting machinery) right-aligned
/// into `digits`; returns where it starts.
///
/// Division by a constant is left to the engine in wasm, and wasmtime compiles it to a real
/// division, tens of cycles each (profiled: a third of datagen's time per record). Digits are
/// taken from 32-bit parts of at most nine digits with [`div10`], a multiply.
fn write_decimal(n: u64, digits: &mut [u8; 24]) -> usize {
    const PART: u64 = 1_000_000_000;
    let mut start = digits.len();
    let mut rest = n;
    let mut put = |part: &mut u32| {
        let tenth = div10(*part);
        start -= 1;
        digits[start] = b'0' + (*part - tenth * 10) as u8;
        *part = tenth;
    };
    while rest >= PART {
        let mut part = (rest % PART) as u32;
        rest /= PART;
        for _ in 0..9 {
            put(&mut part);
        }
    }
    let mut part = rest as u32;
    loop {
        put(&mut part);
        if part == 0 {
            break;
        }
    }
    start
}

/// `n / 10`, exact for every `u32`: `0xCCCC_CCCD / 2^35` is just above 1/10.
fn div10(n: u32) -> u32 {
    ((u64::from(n) * 0xCCCC_CCCD) >> 35) as u32
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

export_source_connector!(Datagen);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_deterministic_sized_json() {
        let v = value_json(42, 1, 20, 7, 100);
        assert_eq!(v, value_json(42, 1, 20, 7, 100));
        assert_ne!(v, value_json(42, 1, 20, 8, 100));
        assert_eq!(v.len(), 100);
        assert!(v.starts_with("{\"id\":42,\"task\":1,\"seq\":20,\"payload\":\""));
        assert!(v.ends_with("\"}"));
        // A size below the header still yields valid JSON.
        assert!(value_json(1, 0, 0, 0, 1).ends_with("\"\"}"));
    }

    /// The generator as first written, one character at a time: the faster one must write
    /// exactly the same records, or runs with the same seed would stop matching.
    fn reference_value(id: u64, task: u64, seq: u64, seed: u64, size: usize) -> String {
        let mut value = format!("{{\"id\":{id},\"task\":{task},\"seq\":{seq},\"payload\":\"");
        let mut mixed = id;
        let mut state = seed ^ splitmix64(&mut mixed);
        while value.len() + 2 < size {
            let bits = splitmix64(&mut state);
            for shift in (0..60).step_by(6) {
                if value.len() + 2 >= size {
                    break;
                }
                value.push(ALPHABET[((bits >> shift) & 63) as usize] as char);
            }
        }
        value.push_str("\"}");
        value
    }

    #[test]
    fn values_match_the_reference_generator() {
        for size in [0, 1, 40, 41, 42, 50, 51, 52, 100, 1000] {
            for (id, seed) in [(0, 0), (42, 7), (1_234_567, u64::MAX), (u64::MAX, 3)] {
                assert_eq!(
                    value_json(id, 1, id / 2, seed, size),
                    reference_value(id, 1, id / 2, seed, size),
                    "id {id}, seed {seed}, size {size}"
                );
            }
        }
    }

    #[test]
    fn div10_is_exact() {
        let samples = (0..100_000)
            .chain((0..=u32::MAX).step_by(9_973))
            .chain(u32::MAX - 100..=u32::MAX);
        for n in samples {
            assert_eq!(div10(n), n / 10, "{n}");
        }
    }

    #[test]
    fn counters_match_the_formatter() {
        for (start, step) in [
            (0, 1),
            (0, 3),
            (7, 1),
            (95, 7),
            (999, 1),
            (999_999_998, 1),
            (123, 1_000),
            (9_990, 12_345),
            (u64::MAX - 30, 1),
        ] {
            let mut counter = Counter::new(start, step);
            for k in 0..2_000u64 {
                let Some(n) = k.checked_mul(step).and_then(|d| d.checked_add(start)) else {
                    break;
                };
                assert_eq!(counter.as_str(), n.to_string(), "{start} + {k} × {step}");
                counter.advance();
            }
        }
        // A step of 0 (the constant task index) stays put.
        let mut task = Counter::new(4, 0);
        task.advance();
        assert_eq!(task.as_str(), "4");
    }

    #[test]
    fn decimals_match_the_formatter() {
        for n in [
            0,
            7,
            10,
            99,
            12_345,
            999_999_999,
            1_000_000_000,
            1_000_000_001,
            10_000_000_000_000_000_000,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            assert_eq!(Counter::new(n, 0).as_str(), n.to_string());
        }
    }
}
