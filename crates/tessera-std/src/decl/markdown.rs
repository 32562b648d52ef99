//! The docs tables: every declared op's tensors, parameters, invariants and variants as
//! Markdown, written between two marker comments of docs/kernels.md. A test regenerates
//! them and fails when the checked-in copy is stale.

use super::{default_text, dtype_text, kind_text, shape_text, DtypeRule, OpDecl};

/// The line that opens the generated part of docs/kernels.md.
pub const BEGIN: &str =
    "<!-- op-tables:begin — generated from the op declarations by `tessera list --markdown`; do not edit -->";
/// The line that closes it.
pub const END: &str = "<!-- op-tables:end -->";

/// A table cell: pipes escaped, newlines flattened.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A tensor's row of an op's tensor table.
fn tensor_row(name: &str, role: &str, shape: &[&str], dtype: DtypeRule, doc: &str) -> String {
    format!(
        "| `{name}` | {role} | `{}` | {} | {} |\n",
        shape_text(shape),
        cell(&dtype_text(dtype)),
        cell(doc)
    )
}

/// One op's section.
pub fn op_section(op: &OpDecl) -> String {
    let mut s = format!(
        "### `{}` ({})\n\n{}\n\n",
        op.name,
        op.family,
        cell(op.summary)
    );
    s += "| tensor | role | shape | dtype | meaning |\n|---|---|---|---|---|\n";
    for t in op.inputs {
        let role = if t.optional {
            "input, optional"
        } else {
            "input"
        };
        s += &tensor_row(t.name, role, t.shape, t.dtype, t.doc);
    }
    for o in op.outputs {
        s += &tensor_row(o.name, "output", o.shape, o.dtype, o.doc);
    }
    if !op.params.is_empty() {
        s += "\n| parameter | type | default | meaning |\n|---|---|---|---|\n";
        for p in op.params {
            s += &format!(
                "| `{}` | {} | {} | {} |\n",
                p.name,
                cell(&kind_text(p.kind)),
                cell(&default_text(p.default)),
                cell(p.doc)
            );
        }
    }
    if !op.invariants.is_empty() {
        s += "\nInvariants (with the generated rejection cases that break them):\n";
        for (n, i) in op.invariants.iter().enumerate() {
            let broken: Vec<String> = op
                .rejections
                .iter()
                .filter(|r| r.invariant == n)
                .map(|r| format!("`{}`", super::rejections::describe(r.by)))
                .collect();
            if broken.is_empty() {
                s += &format!("- {i}\n");
            } else {
                s += &format!("- {i} — broken by {}\n", broken.join(", "));
            }
        }
    }
    s += &format!(
        "\nAccuracy (max error vs the f64 reference, what every case and benchmark check \
         compares against): {}\n",
        cell(&op.accuracy.text())
    );
    if let Some(w) = op.workspace {
        s += &format!(
            "\nWorkspace (the caller makes it once, outside the op call): {} bytes\n",
            cell(w.bytes)
        );
    }
    if !op.variants.is_empty() {
        s += "\nVariants:\n";
        for v in op.variants {
            s += &format!("- `{}`: {}\n", v.name, v.when);
        }
    }
    s
}

/// Every op's section, in registry order.
pub fn tables(ops: &[&OpDecl]) -> String {
    ops.iter()
        .map(|op| op_section(op))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `doc` with the text between the markers replaced by `generated`.
pub fn splice(doc: &str, generated: &str) -> Result<String, String> {
    let begin = doc
        .find(BEGIN)
        .ok_or_else(|| format!("the marker line `{BEGIN}` is missing"))?;
    let after_begin = begin + BEGIN.len();
    let end = doc[after_begin..]
        .find(END)
        .map(|e| after_begin + e)
        .ok_or_else(|| format!("the marker line `{END}` is missing after the opening one"))?;
    Ok(format!(
        "{}\n\n{}\n{}",
        &doc[..after_begin],
        generated.trim_end(),
        &doc[end..]
    ))
}
