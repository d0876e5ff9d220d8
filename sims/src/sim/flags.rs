//! A run's configuration in the command line's words.
//!
//! [`SimConfig`](super::SimConfig) and [`QueueConfig`](super::queue::QueueConfig)
//! serialize under their flags' names, with every value written as its flag takes it
//! (`60s`, `handoff`, `crash=4,pause=6`). That one declaration serves both ways:
//! - flags given on the command line are laid over the scenario's defaults
//!   ([`overlay`]), so that no code copies one field into another;
//! - the replay command is the settings that differ from the scenario's defaults
//!   ([`command`]), so that it cannot forget one.
//!
//! The flag groups (`RunFlags`, `LeaseFlags`, `QueueFlags`, in the command line's `cli::args`)
//! serialize the same way, skipping what was not given; which flags were given, and
//! so which do not apply to a scenario, is read from them too ([`given`]).

use super::error::SimError;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use leasehold_engine::balance::{STRATEGY_NAMES, Strategy};
use leasehold_engine::lease::Liveness;
use leasehold_engine::{ExpiryRule, Millis};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The settings of `value`, as flag names and values.
fn settings(value: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        // Every configuration and flag group is a struct.
        _ => Map::new(),
    }
}

/// The flags given in a flag group, by name, alphabetically.
pub fn given(flags: &impl Serialize) -> Vec<String> {
    settings(flags).keys().cloned().collect()
}

/// `base` with every flag in `flags` laid over it. A flag that names no setting of
/// `base` is refused: it would otherwise be ignored without a word.
pub fn overlay<T: Serialize + DeserializeOwned>(
    base: &T,
    flags: Map<String, Value>,
) -> Result<T, SimError> {
    let mut merged = settings(base);
    for (name, value) in flags {
        match merged.get_mut(&name) {
            Some(slot) => *slot = value,
            None => return Err(SimError::Setting(format!("--{name} sets nothing here"))),
        }
    }
    serde_json::from_value(Value::Object(merged)).map_err(|e| SimError::Setting(e.to_string()))
}

/// The flags of a flag group, ready for [`overlay`].
pub fn of(flags: &impl Serialize) -> Map<String, Value> {
    settings(flags)
}

/// `prefix`, then `--name value` for every setting of `config` that differs from
/// `base` or is named in `always`; `skip` names the settings `prefix` already says.
pub fn command<T: Serialize>(
    prefix: String,
    config: &T,
    base: &T,
    always: &[&str],
    skip: &[&str],
) -> String {
    let base = settings(base);
    let mut out = prefix;
    for (name, value) in settings(config) {
        if skip.contains(&name.as_str()) {
            continue;
        }
        if base.get(&name) == Some(&value) && !always.contains(&name.as_str()) {
            continue;
        }
        match value {
            Value::Null => {}
            Value::String(text) => out.push_str(&format!(" --{name} {text}")),
            other => out.push_str(&format!(" --{name} {other}")),
        }
    }
    out
}

/// Serde for a setting written as its `Display` and read with `FromStr`.
pub mod text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::fmt::Display;
    use std::str::FromStr;

    /// Writes `value` as its flag text.
    pub fn serialize<T: Display, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    /// Reads a flag text.
    pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: FromStr<Err: Display>,
        D: Deserializer<'de>,
    {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Serde for an optional setting written as its `Display` (absent: null).
pub mod opt_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::fmt::Display;
    use std::str::FromStr;

    /// Writes `value` as its flag text, or null.
    pub fn serialize<T: Display, S: Serializer>(
        value: &Option<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    /// Reads a flag text, or null.
    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr<Err: Display>,
        D: Deserializer<'de>,
    {
        match Option::<String>::deserialize(d)? {
            Some(text) => text.parse().map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

/// Serde for a duration written as the flags take it (`60s`, `1500ms`).
pub mod duration {
    use leasehold_engine::Millis;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `value` as `60s` or `1500ms`.
    pub fn serialize<S: Serializer>(value: &Millis, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    /// Reads a duration with a unit.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Millis, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde for an optional duration (absent: null).
pub mod opt_duration {
    use leasehold_engine::Millis;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `value` as `60s` or `1500ms`, or null.
    pub fn serialize<S: Serializer>(value: &Option<Millis>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    /// Reads a duration with a unit, or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Millis>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => super::parse_duration(&text)
                .map(Some)
                .map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

/// Reads a duration with a unit, such as `60s` or `10m`, for every `leasehold` flag.
pub fn parse_duration(text: &str) -> Result<Millis, String> {
    humantime::parse_duration(text)
        .map(Millis::from)
        .map_err(|e| format!("{e} (write a unit, such as 60s or 10m)"))
}

/// `--strategy NAME`: the engine's strategies, each listed with its origin in `--help`.
pub fn strategy_parser() -> impl clap::builder::TypedValueParser<Value = Strategy> {
    let values = STRATEGY_NAMES
        .iter()
        .filter_map(|name| name.parse::<Strategy>().ok())
        .map(|s| PossibleValue::new(s.name()).help(s.about()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<Strategy>())
}

/// `--expiry RULE`: the engine's expiry rules.
pub fn expiry_parser() -> impl clap::builder::TypedValueParser<Value = ExpiryRule> {
    PossibleValuesParser::new([
        PossibleValue::new("observed").help(
            "the holder's authority runs from the send time of its last successful write; \
             others wait the duration plus drift on their own clock",
        ),
        PossibleValue::new("timestamp")
            .help("CFP's rule: readers compare the owner's wall-clock timestamp with their own"),
    ])
    .try_map(|name| name.parse::<ExpiryRule>())
}

/// `--liveness lease|session`: where a holder's authority comes from.
pub fn liveness_parser() -> impl clap::builder::TypedValueParser<Value = Liveness> {
    PossibleValuesParser::new([
        PossibleValue::new("lease")
            .help("each lease is renewed on its own (the change feed processor's way)"),
        PossibleValue::new("session").help(
            "one heartbeat per host renews every lease it holds; a taker fences a dead \
             host's session first (handoff only)",
        ),
    ])
    .try_map(|name| name.parse::<Liveness>())
}
