//! Unit tests of the selector language and the equality filters, on
//! messages encoded the way clients send them.

use bytes::{Bytes, BytesMut};

use super::*;
use crate::codec::MessageView;

fn described(code: u64, value: Value) -> Value {
    Value::Described(Box::new((Descriptor::Code(code), value)))
}

/// A message with a durable header of priority 7, properties (message-id,
/// to, subject, reply-to, correlation-id, creation-time) and these
/// application properties.
fn message(app: &[(&str, Value)]) -> Message {
    let mut out = BytesMut::new();
    described(0x70, Value::List(vec![Value::Bool(true), Value::Ubyte(7)])).encode(&mut out);
    let properties = Value::List(vec![
        Value::String("id-1".into()),
        Value::Null,
        Value::String("/queues/orders".into()),
        Value::String("order".into()),
        Value::String("/queues/replies".into()),
        Value::Ulong(42),
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Timestamp(1_700_000_000_000),
    ]);
    described(0x73, properties).encode(&mut out);
    let map = app
        .iter()
        .map(|(k, v)| (Value::String((*k).to_owned()), v.clone()))
        .collect();
    described(0x74, Value::Map(map)).encode(&mut out);
    described(0x77, Value::String("body".into())).encode(&mut out);
    let bytes: Bytes = out.freeze();
    let view = MessageView::scan(&bytes).expect("a valid message");
    Message {
        header: view.header,
        header_len: view.header_len as u32,
        bytes,
    }
}

fn sample() -> Message {
    message(&[
        ("colour", Value::String("red".into())),
        ("size", Value::Int(5)),
        ("weight", Value::Double(2.5)),
        ("big", Value::Ulong(u64::MAX)),
        ("flag", Value::Bool(true)),
        ("path", Value::String("a_b%c".into())),
        ("x-key", Value::Symbol(Symbol::from("sym"))),
    ])
}

fn check(selector: &str) -> bool {
    fuzz_selector(selector, &sample()).unwrap_or_else(|| panic!("{selector} does not parse"))
}

fn refused(selector: &str) -> bool {
    parser::parse(selector).is_err()
}

#[test]
fn comparisons_and_arithmetic() {
    assert!(check("colour = 'red'"));
    assert!(!check("colour = 'blue'"));
    assert!(check("colour <> 'blue'"));
    assert!(check(
        "size = 5 AND size >= 5 AND size <= 5 AND size > 4 AND size < 6"
    ));
    assert!(check(
        "size + 1 = 6 AND size * 2 = 10 AND size - 10 = -5 AND size / 2 = 2"
    ));
    assert!(check("-size = -5 AND +size = 5 AND (size + 1) * 2 = 12"));
    assert!(check(
        "weight * 2 = 5.0 AND weight > 2 AND 2.5E0 = weight AND .5 < weight"
    ));
    assert!(check("flag = TRUE AND flag <> false"));
    assert!(check("size = 0x5 AND size = 5L"));
}

#[test]
fn numbers_promote_and_unlike_types_compare_false() {
    // int against double, and a ulong beyond a long as a double.
    assert!(check("size = 5.0"));
    assert!(check("big > 9223372036854775807"));
    // String against number: false, so NOT makes it true (JMS 3.8.1.2).
    assert!(!check("colour = 5"));
    assert!(!check("size = '5'"));
    assert!(check("NOT (size = '5')"));
    // Strings and booleans order nothing.
    assert!(!check("colour < 'zzz'"));
    assert!(!check("colour >= 'red'"));
    // Arithmetic on text is unknown, and so is its comparison.
    assert!(!check("colour + 1 = 1"));
    assert!(!check("NOT (colour + 1 = 1)"));
    // Exact division by zero is unknown; overflow goes to double.
    assert!(!check("size / 0 = 0") && !check("NOT (size / 0 = 0)"));
    assert!(check("9223372036854775807 * 2 > 9223372036854775807"));
}

#[test]
fn three_valued_logic_with_missing_properties() {
    // `missing` is null: comparisons are unknown, never true.
    assert!(!check("missing = 1"));
    assert!(!check("NOT (missing = 1)"));
    assert!(!check("missing <> 1"));
    // AND: false wins over unknown; OR: true wins over unknown.
    assert!(!check("missing = 1 AND size = 5"));
    assert!(!check("NOT (missing = 1 AND size = 5)"));
    assert!(check("NOT (missing = 1 AND size = 6)"));
    assert!(check("missing = 1 OR size = 5"));
    assert!(!check("missing = 1 OR size = 6"));
    assert!(!check("NOT (missing = 1 OR size = 6)"));
    assert!(check("missing IS NULL AND size IS NOT NULL"));
    assert!(!check("missing IS NOT NULL OR size IS NULL"));
}

#[test]
fn in_between_and_like() {
    assert!(check("colour IN ('blue', 'red')"));
    assert!(!check("colour NOT IN ('blue', 'red')"));
    assert!(check("size IN (4, 5, 6) AND size NOT IN (1, -2)"));
    assert!(!check("missing IN ('a') OR missing NOT IN ('a')"));
    assert!(check("size BETWEEN 5 AND 6 AND size NOT BETWEEN 6 AND 9"));
    assert!(check("weight BETWEEN 2 AND 3"));
    assert!(!check(
        "missing BETWEEN 1 AND 2 OR missing NOT BETWEEN 1 AND 2"
    ));
    assert!(check(
        "colour LIKE 'r%' AND colour LIKE '_e_' AND colour LIKE '%'"
    ));
    assert!(!check("colour LIKE 'r_'"));
    assert!(check("colour NOT LIKE 'b%'"));
    // Escapes: `\_` and `\%` are literal; a plain `_` still matches one.
    assert!(check(r"path LIKE 'a\_b\%c' ESCAPE '\'"));
    assert!(!check(r"path LIKE 'a\_b\%' ESCAPE '\'"));
    assert!(check("path LIKE 'a!_b!%c' ESCAPE '!'"));
    assert!(check("path LIKE 'a_b_c'"));
    // LIKE on a number or a missing property is unknown either way.
    assert!(!check("size LIKE '5' OR size NOT LIKE '5'"));
    assert!(!check("missing LIKE '%' OR missing NOT LIKE '%'"));
}

#[test]
fn jms_header_names_map_to_amqp_fields() {
    assert!(check("JMSMessageID = 'id-1'"));
    assert!(check("JMSCorrelationID = 42"));
    assert!(check("JMSPriority = 7 AND JMSPriority > 4"));
    assert!(check("JMSDeliveryMode = 'PERSISTENT'"));
    assert!(check("JMSTimestamp = 1700000000000"));
    assert!(check("JMSType = 'order'"));
    assert!(check(
        "JMSDestination = '/queues/orders' AND JMSReplyTo LIKE '%replies'"
    ));
    assert!(check("JMSExpiration IS NULL AND JMSXGroupID IS NULL"));
    // A symbol-valued property and a quoted identifier.
    assert!(check("\"x-key\" = 'sym'"));
    // Literal quotes.
    let quoted = message(&[("name", Value::String("it's".into()))]);
    assert_eq!(fuzz_selector("name = 'it''s'", &quoted), Some(true));
}

#[test]
fn a_message_without_header_has_the_default_priority() {
    let mut out = BytesMut::new();
    described(0x77, Value::Null).encode(&mut out);
    let bytes = out.freeze();
    let bare = Message {
        header: None,
        header_len: 0,
        bytes,
    };
    assert_eq!(fuzz_selector("JMSPriority = 4", &bare), Some(true));
    assert_eq!(
        fuzz_selector("JMSDeliveryMode = 'NON_PERSISTENT'", &bare),
        Some(true)
    );
    assert_eq!(fuzz_selector("colour IS NULL", &bare), Some(true));
}

#[test]
fn bad_selectors_are_refused_not_panicked_on() {
    for bad in [
        "",
        "colour =",
        "colour = 'red",
        "= 5",
        "colour LIKE 5",
        "a LIKE 'x' ESCAPE 'ab'",
        "a LIKE 'x!' ESCAPE '!'",
        "a IN ()",
        "a IN (b)",
        "a BETWEEN 1",
        "a IS 5",
        "a NOT 5",
        "(a = 1",
        "a = 1)",
        "a = 1 #",
        "99999999999999999999999e999999 = a AND",
    ] {
        assert!(refused(bad), "{bad:?} parsed");
    }
    // Bounded nesting and length, whatever the input.
    assert!(refused(&format!(
        "{}a = 1{}",
        "(".repeat(10_000),
        ")".repeat(10_000)
    )));
    assert!(refused(&format!("{}a = 1", "NOT ".repeat(1000))));
    assert!(refused(&format!("a = {}", "1 + ".repeat(200) + "1")));
    assert!(refused(&format!(
        "a = '{}'",
        "x".repeat(SELECTOR_BYTES_MAX)
    )));
    // A long flat AND chain is fine: n-ary, not deep.
    let chain = vec!["size = 5"; 300].join(" AND ");
    assert!(check(&chain));
}

#[test]
fn like_patterns_backtrack_without_recursion() {
    let p = like::LikePattern::new("%a%a%a%a%b", None).expect("compiles");
    assert!(!p.matches(&"a".repeat(5000)));
    assert!(p.matches("xaxaxaxaxb"));
    let unicode = like::LikePattern::new("é_ç%", None).expect("compiles");
    assert!(unicode.matches("éxçyz"));
}

fn filter_set(entries: Vec<(Symbol, Value)>) -> Result<Option<MessageFilter>, FilterError> {
    MessageFilter::from_filter_set(&entries)
}

#[test]
fn the_filter_keeps_only_what_it_applies() {
    let set = vec![
        selector_entry("jms-selector", "colour = 'red'"),
        (Symbol::from("other"), described(0x9999, Value::Null)),
        (
            Symbol::from("legacy"),
            Value::String("colour = 'blue'".into()),
        ),
        (
            Symbol::from("app"),
            Value::Described(Box::new((
                Descriptor::Symbol(Symbol::from("amqp:application-properties-filter")),
                Value::Map(vec![(Value::String("size".into()), Value::Long(5))]),
            ))),
        ),
    ];
    let filter = filter_set(set.clone()).expect("valid").expect("applies");
    assert_eq!(filter.applied(), &vec![set[0].clone(), set[3].clone()]);
    assert!(filter.matches(&sample()));
    // The wire form rebuilds the same filter.
    assert_eq!(
        MessageFilter::from_wire(&filter.to_wire()).expect("reads"),
        filter
    );
    // Nothing known: no filter at all.
    assert!(filter_set(vec![set[1].clone(), set[2].clone()])
        .expect("ok")
        .is_none());
    // A bad selector is an error, as is a properties filter on no field.
    assert!(matches!(
        filter_set(vec![selector_entry("s", "colour =")]),
        Err(FilterError::Selector(_))
    ));
    let bad_field = described(
        PROPERTIES_FILTER_CODE,
        Value::Map(vec![(Value::Symbol(Symbol::from("colour")), Value::Null)]),
    );
    assert!(filter_set(vec![(Symbol::from("p"), bad_field)]).is_err());
}

#[test]
fn equality_filters_match_by_value_prefix_and_suffix() {
    let app = |pairs: Vec<(&str, Value)>| {
        let map = pairs
            .into_iter()
            .map(|(k, v)| (Value::String(k.to_owned()), v))
            .collect();
        filter_set(vec![(
            Symbol::from("f"),
            described(APPLICATION_PROPERTIES_FILTER_CODE, Value::Map(map)),
        )])
        .expect("valid")
        .expect("applies")
        .matches(&sample())
    };
    assert!(app(vec![("colour", Value::String("red".into()))]));
    assert!(app(vec![
        ("size", Value::Long(5)),
        ("colour", Value::Symbol(Symbol::from("red")))
    ]));
    assert!(!app(vec![
        ("size", Value::Long(5)),
        ("colour", Value::String("blue".into()))
    ]));
    assert!(app(vec![("colour", Value::String("&p:re".into()))]));
    assert!(app(vec![("colour", Value::String("&s:ed".into()))]));
    assert!(!app(vec![("colour", Value::String("&p:ed".into()))]));
    assert!(app(vec![("colour", Value::Null)]));
    assert!(!app(vec![("missing", Value::Null)]));
    assert!(!app(vec![("size", Value::String("5".into()))]));
    let props = filter_set(vec![(
        Symbol::from("p"),
        described(
            PROPERTIES_FILTER_CODE,
            Value::Map(vec![
                (
                    Value::Symbol(Symbol::from("subject")),
                    Value::String("order".into()),
                ),
                (
                    Value::Symbol(Symbol::from("correlation-id")),
                    Value::Ulong(42),
                ),
            ]),
        ),
    )])
    .expect("valid")
    .expect("applies");
    assert!(props.matches(&sample()));
}
