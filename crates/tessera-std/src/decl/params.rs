//! Parameter values: parsed from `name=value` text against an op's declaration (unknown
//! names, malformed values and values outside the allowed set are refused with the
//! declaration's own words), defaults filled in, then read by the op's call with typed
//! getters.

use super::{kind_text, OpDecl, ParamDefault, ParamKind};
use crate::error::OpError;
use std::collections::BTreeMap;

/// One parsed value.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    Bool(bool),
    UInt(u64),
    Float(f64),
    Choice(&'static str),
    UIntList(Vec<u64>),
}

/// The parameters of one call: every given or defaulted one (an `Auto` parameter that was
/// not given is absent).
#[derive(Clone, Debug)]
pub struct ParamValues {
    op: &'static str,
    values: BTreeMap<&'static str, ParamValue>,
    /// The parameters the caller named (the rest hold their defaults).
    given: Vec<&'static str>,
}

fn parse_value(op: &OpDecl, name: &str, kind: ParamKind, text: &str) -> Result<ParamValue, String> {
    let bad = |what: &str| format!("`{}` --param {name}={text}: expected {what}", op.name);
    let text = text.trim();
    match kind {
        ParamKind::Bool => match text {
            "true" | "1" => Ok(ParamValue::Bool(true)),
            "false" | "0" => Ok(ParamValue::Bool(false)),
            _ => Err(bad("true, false, 1 or 0")),
        },
        ParamKind::UInt { min, max } => {
            let v: u64 = text
                .parse()
                .map_err(|_| bad(&format!("an unsigned integer ({})", kind_text(kind))))?;
            if v < min || v > max {
                return Err(bad(&format!("a value in {min}..={max}")));
            }
            Ok(ParamValue::UInt(v))
        }
        ParamKind::Float => match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(ParamValue::Float(v)),
            _ => Err(bad("a finite number")),
        },
        ParamKind::Choice(words) => words
            .iter()
            .find(|w| **w == text)
            .map(|w| ParamValue::Choice(w))
            .ok_or_else(|| bad(&format!("one of {}", words.join(", ")))),
        ParamKind::UIntList => text
            .split(',')
            .map(|s| s.trim().parse::<u64>())
            .collect::<Result<Vec<u64>, _>>()
            .map(ParamValue::UIntList)
            .map_err(|_| bad("comma-separated unsigned integers, like 0,5,12")),
    }
}

impl ParamValues {
    /// Parses `given` (name, text) against `op`'s parameters and fills in the defaults.
    pub fn parse(op: &OpDecl, given: &[(String, String)]) -> Result<ParamValues, String> {
        let mut values = BTreeMap::new();
        let mut named = Vec::new();
        for (name, text) in given {
            let Some(p) = op.param(name) else {
                let known: Vec<&str> = op.params.iter().map(|p| p.name).collect();
                return Err(format!(
                    "`{}` takes no parameter `{name}`; its parameters: {}",
                    op.name,
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            };
            let v = parse_value(op, p.name, p.kind, text)?;
            named.push(p.name);
            if values.insert(p.name, v).is_some() {
                return Err(format!("`{}` --param {name} is given twice", op.name));
            }
        }
        for p in op.params {
            if values.contains_key(p.name) {
                continue;
            }
            match p.default {
                ParamDefault::Required => {
                    return Err(format!(
                        "`{}` needs --param {}=… ({}): {}",
                        op.name,
                        p.name,
                        kind_text(p.kind),
                        p.doc
                    ))
                }
                ParamDefault::Value(text) => {
                    values.insert(p.name, parse_value(op, p.name, p.kind, text)?);
                }
                ParamDefault::Auto(_) => {}
            }
        }
        Ok(ParamValues {
            op: op.name,
            values,
            given: named,
        })
    }

    /// Whether the caller named `name` (rather than leaving it at its default).
    pub fn is_given(&self, name: &str) -> bool {
        self.given.contains(&name)
    }

    fn get(&self, name: &str) -> Option<&ParamValue> {
        self.values.get(name)
    }

    fn wrong(&self, name: &str, want: &str) -> OpError {
        OpError::invalid(
            self.op,
            format!("parameter `{name}` is missing or not {want}"),
        )
    }

    pub fn bool(&self, name: &str) -> Result<bool, OpError> {
        match self.get(name) {
            Some(ParamValue::Bool(b)) => Ok(*b),
            _ => Err(self.wrong(name, "a bool")),
        }
    }

    pub fn opt_uint(&self, name: &str) -> Result<Option<u64>, OpError> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::UInt(v)) => Ok(Some(*v)),
            Some(_) => Err(self.wrong(name, "an unsigned integer")),
        }
    }

    pub fn uint(&self, name: &str) -> Result<u64, OpError> {
        self.opt_uint(name)?
            .ok_or_else(|| self.wrong(name, "an unsigned integer"))
    }

    /// An unsigned parameter as u32 (its declared range keeps it there).
    pub fn u32(&self, name: &str) -> Result<u32, OpError> {
        u32::try_from(self.uint(name)?).map_err(|_| self.wrong(name, "within u32"))
    }

    pub fn opt_u32(&self, name: &str) -> Result<Option<u32>, OpError> {
        self.opt_uint(name)?
            .map(|v| u32::try_from(v).map_err(|_| self.wrong(name, "within u32")))
            .transpose()
    }

    pub fn usize(&self, name: &str) -> Result<usize, OpError> {
        usize::try_from(self.uint(name)?).map_err(|_| self.wrong(name, "within usize"))
    }

    pub fn opt_f64(&self, name: &str) -> Result<Option<f64>, OpError> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Float(v)) => Ok(Some(*v)),
            Some(_) => Err(self.wrong(name, "a number")),
        }
    }

    pub fn f64(&self, name: &str) -> Result<f64, OpError> {
        self.opt_f64(name)?
            .ok_or_else(|| self.wrong(name, "a number"))
    }

    pub fn f32(&self, name: &str) -> Result<f32, OpError> {
        Ok(self.f64(name)? as f32)
    }

    pub fn opt_f32(&self, name: &str) -> Result<Option<f32>, OpError> {
        Ok(self.opt_f64(name)?.map(|v| v as f32))
    }

    pub fn choice(&self, name: &str) -> Result<&'static str, OpError> {
        match self.get(name) {
            Some(ParamValue::Choice(c)) => Ok(c),
            _ => Err(self.wrong(name, "a choice")),
        }
    }

    pub fn opt_choice(&self, name: &str) -> Result<Option<&'static str>, OpError> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Choice(c)) => Ok(Some(c)),
            Some(_) => Err(self.wrong(name, "a choice")),
        }
    }

    pub fn opt_usize_list(&self, name: &str) -> Result<Option<Vec<usize>>, OpError> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::UIntList(v)) => v
                .iter()
                .map(|&x| usize::try_from(x).map_err(|_| self.wrong(name, "within usize")))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(self.wrong(name, "a list")),
        }
    }

    /// Every parameter as `name=value` text, for messages.
    pub fn describe(&self) -> String {
        self.values
            .iter()
            .map(|(k, v)| match v {
                ParamValue::Bool(b) => format!("{k}={b}"),
                ParamValue::UInt(u) => format!("{k}={u}"),
                ParamValue::Float(f) => format!("{k}={f}"),
                ParamValue::Choice(c) => format!("{k}={c}"),
                ParamValue::UIntList(l) => format!(
                    "{k}={}",
                    l.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
                ),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find_op;

    fn parse(op: &str, given: &[(&str, &str)]) -> Result<ParamValues, String> {
        let op = find_op(op).expect("registered");
        let given: Vec<(String, String)> = given
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ParamValues::parse(op, &given)
    }

    #[test]
    fn booleans_take_true_false_1_and_0() {
        for (text, want) in [("true", true), ("1", true), ("false", false), ("0", false)] {
            let p = parse("sdpa_prefill", &[("causal", text)]).expect("parses");
            assert_eq!(p.bool("causal").ok(), Some(want), "{text}");
        }
        assert!(parse("sdpa_prefill", &[("causal", "yes")]).is_err());
    }

    #[test]
    fn defaults_fill_in_and_auto_parameters_stay_absent() {
        let p = parse("sdpa_multi_query", &[("base_kv", "7")]).expect("parses");
        assert_eq!(p.usize("base_kv").ok(), Some(7));
        assert_eq!(p.bool("causal").ok(), Some(true));
        assert_eq!(p.u32("window").ok(), Some(0));
        assert_eq!(p.opt_f32("scale").ok(), Some(None));
        assert_eq!(p.opt_u32("splits").ok(), Some(None));
        let e = parse("sdpa_multi_query", &[]).expect_err("base_kv is required");
        assert!(e.contains("base_kv"), "{e}");
    }

    #[test]
    fn values_outside_the_declared_set_are_refused() {
        let e = parse("sdpa_decode_split", &[("kv_len", "3"), ("splits", "1025")])
            .expect_err("above the range");
        assert!(e.contains("1..=1024"), "{e}");
        let e = parse("rope", &[("scaling", "linear")]).expect_err("not a choice");
        assert!(e.contains("none, llama3, yarn"), "{e}");
        let e = parse("rms_norm", &[("eps", "inf")]).expect_err("not finite");
        assert!(e.contains("finite"), "{e}");
        let e = parse("rms_norm", &[("epsilon", "1")]).expect_err("unknown");
        assert!(
            e.contains("no parameter `epsilon`") && e.contains("eps"),
            "{e}"
        );
        let p = parse("gdn_chunked_prefill", &[("cu_seqlens", "0, 5,9")]).expect("list");
        assert_eq!(
            p.opt_usize_list("cu_seqlens").ok(),
            Some(Some(vec![0, 5, 9]))
        );
        assert!(parse("gdn_chunked_prefill", &[("cu_seqlens", "0,-5")]).is_err());
    }
}
