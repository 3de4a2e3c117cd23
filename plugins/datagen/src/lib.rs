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

    fn task_configs(config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
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
        let mut key = String::with_capacity(20);
        for _ in 0..n {
            let seq = self.next_seq;
            let id = seq * self.tasks + self.index;
            value.clear();
            write_value_json(
                &mut value,
                id,
                self.index,
                seq,
                self.settings.seed,
                self.settings.value_size,
            );
            offset.clear();
            offset.push_str("{\"seq\":");
            push_decimal(&mut offset, seq);
            offset.push('}');
            let mut record = SourceRecordRef::new(&self.partition, &offset, DataRef::Json(&value));
            if self.settings.sequence_keys {
                key.clear();
                push_decimal(&mut key, id);
                record = record.with_key(DataRef::Text(&key));
            }
            batch.push_ref(record)?;
            self.next_seq += 1;
            self.generated_since_start += 1;
        }
        Ok(())
    }
}

/// The JSON value of record `id`, padded with generated characters to about `size` bytes.
pub fn value_json(id: u64, task: u64, seq: u64, seed: u64, size: usize) -> String {
    let mut value = String::with_capacity(size.max(80));
    write_value_json(&mut value, id, task, seq, seed, size);
    value
}

/// The payload's characters: one for each 6-bit group of a generated word.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// [`value_json`], appended to `value`, which is empty.
fn write_value_json(value: &mut String, id: u64, task: u64, seq: u64, seed: u64, size: usize) {
    value.push_str("{\"id\":");
    push_decimal(value, id);
    value.push_str(",\"task\":");
    push_decimal(value, task);
    value.push_str(",\"seq\":");
    push_decimal(value, seq);
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
    // Ten characters from each generated word, its low 6-bit groups first.
    for chunk in bytes[start..].chunks_mut(10) {
        let bits = splitmix64(&mut state);
        for (i, byte) in chunk.iter_mut().enumerate() {
            *byte = ALPHABET[((bits >> (6 * i)) & 63) as usize];
        }
    }
    value.push_str("\"}");
}

/// Append `n` in decimal (what `{n}` formats to, without the formatting machinery).
///
/// Division by a constant is left to the engine in wasm, and wasmtime compiles it to a real
/// division, tens of cycles each (profiled: a third of datagen's time per record). Digits are
/// taken from 32-bit parts of at most nine digits with [`div10`], a multiply.
fn push_decimal(out: &mut String, n: u64) {
    const PART: u64 = 1_000_000_000;
    let mut digits = [0u8; 20];
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
    // SAFETY: only ASCII digits are appended, so the string stays UTF-8. (One copy instead of a
    // `push` per digit, each of which re-checked the capacity.)
    unsafe { out.as_mut_vec() }.extend_from_slice(&digits[start..]);
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
            let mut out = String::from("x");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }
}
