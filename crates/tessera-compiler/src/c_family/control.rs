//! Structured control flow, the same on every target: an `if` declares its results and
//! assigns them at the end of each branch; a `for` keeps its carried values in its result
//! variables (each iteration reads them into `const` block arguments and assigns the
//! yields back), advances without wrapping past its end, and — unless its step is a
//! positive constant — runs only for a positive step and otherwise reaches the dialect's
//! trap, as the CPU sanitizer reports a non-positive step as an error.

use super::{Dialect, Emitter, Fragments, R};
use tessera_ir::{Block, Inst, Scalar, ValueId};

impl<D: Fragments> Emitter<'_, D> {
    pub(super) fn emit_if(
        &mut self,
        inst: &Inst,
        cond: ValueId,
        then_b: &Block,
        else_b: &Block,
    ) -> R<()> {
        if then_b.yields.len() != inst.results.len() || else_b.yields.len() != inst.results.len() {
            return Err(self.malformed("the branches do not yield one value per result"));
        }
        let c = self.val(cond)?;
        for &r in &inst.results {
            self.declare(r, None, false)?;
        }
        self.line(&format!("if ({c}) {{"));
        self.branch(then_b, &inst.results)?;
        if !else_b.insts.is_empty() || !else_b.yields.is_empty() {
            self.line("} else {");
            self.branch(else_b, &inst.results)?;
        }
        self.line("}");
        Ok(())
    }

    /// A branch's body and the assignment of its yields to `results`.
    fn branch(&mut self, b: &Block, results: &[ValueId]) -> R<()> {
        self.depth += 1;
        self.block(b)?;
        for (&r, &y) in results.iter().zip(&b.yields) {
            self.assign(r, y)?;
        }
        self.depth -= 1;
        Ok(())
    }

    pub(super) fn emit_for(
        &mut self,
        inst: &Inst,
        [start, end, step]: [ValueId; 3],
        inits: &[ValueId],
        body: &Block,
    ) -> R<()> {
        let carried = inits.len();
        if body.args.len() != carried + 1
            || body.yields.len() != carried
            || inst.results.len() != carried
        {
            return Err(self.malformed(
                "a loop's body takes the induction variable and one argument per carried value, \
                 and yields one value per carried value",
            ));
        }
        let ivt = self.scalar_ty(body.args[0])?;
        if !matches!(ivt, Scalar::U32 | Scalar::I32) || self.scalar_ty(start)? != ivt {
            return Err(
                self.malformed("loop bounds must be u32 or i32 of the induction variable's type")
            );
        }
        let (s, e, st) = (self.val(start)?, self.val(end)?, self.val(step)?);
        // Carried state lives in the result variables.
        for (&r, &i) in inst.results.iter().zip(inits) {
            let init = self.value(i)?.clone();
            self.declare(r, Some(&init), false)?;
        }
        let ty = <D as Dialect>::scalar_type(ivt);
        let iv = format!("v{}", body.args[0].0);
        let (step_const, end_const) = (self.const_int(step), self.const_int(end));
        let max = if ivt == Scalar::U32 {
            u32::MAX as i64
        } else {
            i32::MAX as i64
        };
        // `iv += step` cannot wrap past `end` when both are known and end + step - 1 fits.
        let plain =
            matches!((step_const, end_const), (Some(st), Some(en)) if st > 0 && en + st - 1 <= max);
        let next = if plain {
            format!("{iv} += {st}")
        } else if ivt == Scalar::U32 {
            format!("{iv} = {e} - {iv} > {st} ? {iv} + {st} : {e}")
        } else {
            // The distance as u32 is exact for any i32 pair with iv < end.
            let (ue, uiv, ust) = (D::to_u32(&e), D::to_u32(&iv), D::to_u32(&st));
            format!("{iv} = {ue} - {uiv} > {ust} ? {iv} + {st} : {e}")
        };
        let guarded = step_const.is_none_or(|c| c <= 0);
        if guarded {
            self.line(&format!("if ({st} > 0) {{"));
            self.depth += 1;
        }
        self.line(&format!("for ({ty} {iv} = {s}; {iv} < {e}; {next}) {{"));
        self.depth += 1;
        self.bind(body.args[0], super::Val::scalar(iv))?;
        for (&a, &r) in body.args[1..].iter().zip(&inst.results) {
            let cur = self.value(r)?.clone();
            self.declare(a, Some(&cur), true)?;
        }
        self.block(body)?;
        for (&r, &y) in inst.results.iter().zip(&body.yields) {
            self.assign(r, y)?;
        }
        self.depth -= 1;
        self.line("}");
        if guarded {
            self.depth -= 1;
            self.line("} else {");
            self.depth += 1;
            self.line(D::STEP_TRAP);
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }
}
