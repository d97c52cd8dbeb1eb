use serde::de::{DeserializeOwned, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// The JSON key that marks an explicit overwrite: `{"$overwrite": value}`.
pub const OVERWRITE_KEY: &str = "$overwrite";

/// One field's write inside an update.
///
/// `Reduce` goes through the field's reducer (append, add, ...). `Overwrite` replaces the value and
/// bypasses the reducer; at most one node may do that to a field in a superstep.
///
/// In JSON a reduce write is the bare value and an overwrite is `{"$overwrite": value}`, so a
/// hand-written update (`graph update --set-json`) reads naturally.
#[derive(Clone, Debug, PartialEq)]
pub enum Write<T> {
    /// Merge through the field's reducer.
    Reduce(T),
    /// Replace the field's value, ignoring its reducer.
    Overwrite(T),
}

impl<T> Write<T> {
    /// The written value, whichever kind of write it is.
    pub fn value(&self) -> &T {
        match self {
            Write::Reduce(v) | Write::Overwrite(v) => v,
        }
    }

    /// True for an explicit overwrite.
    pub fn is_overwrite(&self) -> bool {
        matches!(self, Write::Overwrite(_))
    }
}

impl<T: Serialize> Serialize for Write<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Write::Reduce(v) => v.serialize(serializer),
            Write::Overwrite(v) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(OVERWRITE_KEY, v)?;
                map.end()
            }
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Write<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        let overwrite = match &value {
            serde_json::Value::Object(map) if map.len() == 1 => map.get(OVERWRITE_KEY).cloned(),
            _ => None,
        };
        // In the words of JSON: the field's path is added by whoever decodes the update.
        let custom = <D::Error as serde::de::Error>::custom;
        match overwrite {
            Some(inner) => super::unfit::decode(inner)
                .map(Write::Overwrite)
                .map_err(custom),
            None => super::unfit::decode(value)
                .map(Write::Reduce)
                .map_err(custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_is_the_bare_value_and_overwrite_is_marked() {
        let r: Write<Vec<u8>> = Write::Reduce(vec![1]);
        let o: Write<Vec<u8>> = Write::Overwrite(vec![]);
        assert_eq!(serde_json::to_string(&r).unwrap(), "[1]");
        assert_eq!(serde_json::to_string(&o).unwrap(), r#"{"$overwrite":[]}"#);
        assert_eq!(serde_json::from_str::<Write<Vec<u8>>>("[1]").unwrap(), r);
        assert_eq!(
            serde_json::from_str::<Write<Vec<u8>>>(r#"{"$overwrite":[]}"#).unwrap(),
            o
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_an_error_not_a_default() {
        assert!(serde_json::from_str::<Write<u32>>(r#""seven""#).is_err());
    }
}
