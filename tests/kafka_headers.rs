//! The sink's header shortcut (`wasm_connect::kafka::headers`) against the real broker: it reads
//! librdkafka's private message layout, so this checks that layout on the linked release, and
//! that it tells messages with headers from those without, compressed or not.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use wasm_connect::kafka::headers;
use wasm_connect_tests::kafka::{bootstrap, create_topic, unique_topic};

/// Produce (one batch per compression type) records with no header set, an empty set, and
/// two headers (one null), then read each back through the shortcut.
#[tokio::test]
async fn the_shortcut_skips_only_messages_without_headers() {
    assert!(
        headers::layout_matches(),
        "the linked librdkafka is not the release whose message layout kafka/headers.rs mirrors: check that layout against the new release's src/rdkafka_msg.h, then update LAYOUT_VERSION"
    );
    for compression in ["none", "lz4"] {
        let topic = unique_topic("headers");
        create_topic(&topic, 1).await;
        let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("compression.type", compression)
            .set("linger.ms", "100")
            .create()
            .expect("producer");
        let with_two = OwnedHeaders::new()
            .insert(Header {
                key: "a",
                value: Some("1"),
            })
            .insert(Header {
                key: "n",
                value: None::<&[u8]>,
            });
        let records = [
            BaseRecord::<(), _>::to(&topic).payload("none").partition(0),
            BaseRecord::to(&topic)
                .payload("empty")
                .partition(0)
                .headers(OwnedHeaders::new()),
            BaseRecord::to(&topic)
                .payload("two")
                .partition(0)
                .headers(with_two),
        ];
        for record in records {
            producer.send(record).map_err(|(e, _)| e).expect("send");
        }
        producer.flush(Duration::from_secs(30)).expect("flush");

        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", unique_topic("headers-reader"))
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Beginning)
            .expect("partition");
        consumer.assign(&tpl).expect("assign");
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.len() < 3 && Instant::now() < deadline {
            let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            let read: Vec<(String, Option<Vec<u8>>)> = headers::headers(&m)
                .map(|hs| {
                    hs.iter()
                        .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                        .collect()
                })
                .unwrap_or_default();
            seen.push((value, headers::certainly_none(&m), read));
        }
        assert_eq!(
            seen,
            vec![
                ("none".to_owned(), true, vec![]),
                ("empty".to_owned(), true, vec![]),
                (
                    "two".to_owned(),
                    false,
                    vec![
                        ("a".to_owned(), Some(b"1".to_vec())),
                        ("n".to_owned(), None)
                    ]
                ),
            ],
            "compression {compression}"
        );
    }
}
