//! The rejection check: a call that breaks an invariant must be refused before anything
//! runs, for the stated reason, and must leave its output untouched.

use crate::error::OpError;
use crate::registry::Outcome;
use tessera_runtime::Tensor;

/// Runs `call`; it must be rejected with a message containing `reason`, and `out` must
/// hold the same bytes afterwards.
pub fn expect_rejection(
    out: &Tensor,
    reason: &str,
    call: impl FnOnce() -> Result<(), OpError>,
) -> Result<Outcome, String> {
    let before = out
        .to_bytes()
        .map_err(|e| format!("cannot read the output before the call: {e}"))?;
    let err = match call() {
        Ok(()) => {
            return Err(format!(
                "the call was accepted; expected a rejection ({reason})"
            ))
        }
        Err(e) => e,
    };
    if !err.is_rejection() {
        return Err(format!(
            "the call failed while running instead of being rejected: {err}"
        ));
    }
    let msg = err.to_string();
    if !msg.contains(reason) {
        return Err(format!(
            "rejected for another reason: `{msg}`; expected one mentioning `{reason}`"
        ));
    }
    let after = out
        .to_bytes()
        .map_err(|e| format!("cannot read the output after the call: {e}"))?;
    if before != after {
        return Err(format!("rejected (`{msg}`) but the output was modified"));
    }
    Ok(Outcome {
        checked: 2,
        note: msg,
        ..Outcome::default()
    })
}
