//! Finds the variables a loop body or an `if` branch assigns that were declared outside
//! it: those become the values the structured region carries (SSA form).

use syn::visit::Visit;

#[derive(Default)]
struct Assigned {
    assigned: Vec<syn::Ident>,
    /// The names declared so far in each enclosing block of the region, innermost last:
    /// an assignment to one of them is to that local, not to a variable outside.
    scopes: Vec<Vec<syn::Ident>>,
}

impl Assigned {
    /// The assigned variables declared outside the region, in order of first assignment.
    fn outer(self) -> Vec<syn::Ident> {
        self.assigned
    }

    fn note_target(&mut self, e: &syn::Expr) {
        if let syn::Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                let local = self.scopes.iter().any(|s| s.contains(id));
                if !local && !self.assigned.contains(id) {
                    self.assigned.push(id.clone());
                }
            }
        }
    }

    fn declare(&mut self, p: &syn::Pat) {
        let mut names = Vec::new();
        collect_pat(p, &mut names);
        match self.scopes.last_mut() {
            Some(scope) => scope.extend(names),
            None => self.scopes.push(names),
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
    fn visit_block(&mut self, b: &'ast syn::Block) {
        self.scopes.push(Vec::new());
        syn::visit::visit_block(self, b);
        self.scopes.pop();
    }

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

    /// A `let` declares its names from the next statement on: its own initialiser still
    /// sees the variables outside (`let x = x + 1`).
    fn visit_local(&mut self, l: &'ast syn::Local) {
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        self.declare(&l.pat);
    }

    /// A loop's variable is declared for its body only.
    fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
        self.visit_expr(&f.expr);
        self.scopes.push(Vec::new());
        self.declare(&f.pat);
        self.visit_block(&f.body);
        self.scopes.pop();
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

/// Variables assigned somewhere in `block` that are declared outside it (an assignment
/// to a name a `let` in an enclosing block of the region shadows is to that local), in
/// order of first assignment.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(block: syn::Block) -> Vec<String> {
        outer_assignments(&block)
            .iter()
            .map(|i| i.to_string())
            .collect()
    }

    #[test]
    fn a_name_shadowed_in_a_nested_block_is_still_assigned_outside() {
        // The nested `let a` must not hide the assignment to the outer `a` beside it.
        let b: syn::Block = syn::parse_quote!({
            if c {
                for i in 0..4 {
                    let a = i;
                    x += a;
                }
            }
            if d {
                a = 2.0;
            }
        });
        assert_eq!(names(b), ["x", "a"]);
    }

    #[test]
    fn an_assignment_to_a_local_is_not_carried() {
        let b: syn::Block = syn::parse_quote!({
            a = 1.0;
            let a = a + 1.0;
            let mut t = 0.0;
            t = a;
            for i in 0..2 {
                i = 3;
            }
            if e {
                let y = 1.0;
                y = 2.0;
            } else {
                y = 3.0;
            }
        });
        // The first `a` is the outer one (before the `let`), `t` and the loop's `i` are
        // local, the `else` branch's `y` is outside (the `let y` is the `if` branch's).
        assert_eq!(names(b), ["a", "y"]);
    }
}
