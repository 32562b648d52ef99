//! Finds the variables a loop body or an `if` branch assigns that were declared outside
//! it: those become the values the structured region carries (SSA form).

use syn::visit::Visit;

#[derive(Default)]
struct Assigned {
    assigned: Vec<syn::Ident>,
    declared: Vec<syn::Ident>,
}

impl Assigned {
    /// The assigned variables not declared inside, in order of first assignment.
    fn outer(self) -> Vec<syn::Ident> {
        self.assigned
            .into_iter()
            .filter(|id| !self.declared.contains(id))
            .collect()
    }

    fn note_target(&mut self, e: &syn::Expr) {
        if let syn::Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                if !self.assigned.contains(id) {
                    self.assigned.push(id.clone());
                }
            }
        }
    }
}

fn is_compound(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | BitXorAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

impl<'ast> Visit<'ast> for Assigned {
    fn visit_expr_assign(&mut self, e: &'ast syn::ExprAssign) {
        self.note_target(&e.left);
        syn::visit::visit_expr_assign(self, e);
    }

    fn visit_expr_binary(&mut self, e: &'ast syn::ExprBinary) {
        if is_compound(&e.op) {
            self.note_target(&e.left);
        }
        syn::visit::visit_expr_binary(self, e);
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        collect_pat(&l.pat, &mut self.declared);
        syn::visit::visit_local(self, l);
    }

    fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
        collect_pat(&f.pat, &mut self.declared);
        syn::visit::visit_expr_for_loop(self, f);
    }
}

fn collect_pat(p: &syn::Pat, out: &mut Vec<syn::Ident>) {
    match p {
        syn::Pat::Ident(i) => out.push(i.ident.clone()),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|e| collect_pat(e, out)),
        syn::Pat::Type(t) => collect_pat(&t.pat, out),
        _ => {}
    }
}

/// Variables assigned somewhere in `block` that the block itself does not declare,
/// in order of first assignment.
pub fn outer_assignments(block: &syn::Block) -> Vec<syn::Ident> {
    let mut a = Assigned::default();
    a.visit_block(block);
    a.outer()
}

/// The same for an expression (an `else if` chain).
pub fn outer_assignments_expr(e: &syn::Expr) -> Vec<syn::Ident> {
    let mut a = Assigned::default();
    a.visit_expr(e);
    a.outer()
}
