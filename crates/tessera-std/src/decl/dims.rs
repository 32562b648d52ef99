//! Named dimensions: bound from the shapes of a call's tensors (or given by an example),
//! then used to evaluate a declared shape such as `["B", "C", "W - 1"]` or
//! `["rows…", "n"]` into sizes.

use std::collections::BTreeMap;

/// Sizes of named dimensions; a `name…` run of leading dimensions binds a list.
#[derive(Clone, Debug, Default)]
pub struct Dims {
    one: BTreeMap<String, usize>,
    many: BTreeMap<String, Vec<usize>>,
}

/// A dimension name that stands for a run of leading dimensions: `rows…`.
fn variadic(dim: &str) -> Option<&str> {
    dim.strip_suffix('…')
}

/// A plain identifier (bindable from a shape), not an expression.
fn is_name(dim: &str) -> bool {
    let mut c = dim.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

impl Dims {
    /// Dimensions given by value; a variadic run named `rows` is given as `("rows", 3)`.
    pub fn from_pairs(pairs: &[(&str, usize)]) -> Dims {
        let mut d = Dims::default();
        for (k, v) in pairs {
            d.one.insert(k.to_string(), *v);
        }
        d
    }

    /// Binds the names of `decl` from `actual`. Lenient: a tensor of another rank, or a
    /// size that disagrees with an earlier binding, binds nothing new (the op wrapper
    /// reports the mismatch in its own words).
    pub fn bind(&mut self, decl: &[&str], actual: &[usize]) {
        let fixed = decl.iter().filter(|d| variadic(d).is_none()).count();
        let run = match decl.first().and_then(|d| variadic(d)) {
            Some(name) if actual.len() >= fixed => Some((name, actual.len() - fixed)),
            Some(_) => return,
            None if actual.len() != decl.len() => return,
            None => None,
        };
        let mut rest = actual;
        let mut names = decl;
        if let Some((name, n)) = run {
            self.many
                .entry(name.to_string())
                .or_insert_with(|| actual[..n].to_vec());
            rest = &actual[n..];
            names = &decl[1..];
        }
        for (dim, &size) in names.iter().zip(rest) {
            if is_name(dim) {
                self.one.entry(dim.to_string()).or_insert(size);
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<usize> {
        self.one.get(name).copied()
    }

    fn run(&self, name: &str) -> Option<Vec<usize>> {
        self.many
            .get(name)
            .cloned()
            .or_else(|| self.one.get(name).map(|&v| vec![v]))
    }
}

/// Evaluates one dimension: names and integers joined by `·` (or `*`), `+` and `-`.
fn eval_dim(dim: &str, dims: &Dims) -> Result<usize, String> {
    let mut total: i128 = 0;
    let mut sign: i128 = 1;
    let mut term: i128 = 1;
    let mut word = String::new();
    let flush = |word: &mut String, term: &mut i128| -> Result<(), String> {
        let w = word.trim();
        if w.is_empty() {
            return Err(format!("malformed dimension `{dim}`"));
        }
        let v = match w.parse::<i128>() {
            Ok(v) => v,
            Err(_) => dims
                .get(w)
                .ok_or_else(|| format!("the dimension `{w}` is not known from the inputs"))?
                as i128,
        };
        *term *= v;
        word.clear();
        Ok(())
    };
    for c in dim.chars() {
        match c {
            '·' | '*' => flush(&mut word, &mut term)?,
            '+' | '-' => {
                flush(&mut word, &mut term)?;
                total += sign * term;
                term = 1;
                sign = if c == '+' { 1 } else { -1 };
            }
            _ => word.push(c),
        }
    }
    flush(&mut word, &mut term)?;
    total += sign * term;
    usize::try_from(total).map_err(|_| format!("the dimension `{dim}` = {total} is negative"))
}

/// The sizes of a declared shape under `dims`.
pub fn eval_shape(decl: &[&str], dims: &Dims) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(decl.len());
    for dim in decl {
        match variadic(dim) {
            Some(name) => {
                out.extend(dims.run(name).ok_or_else(|| {
                    format!("the dimensions `{dim}` are not known from the inputs")
                })?)
            }
            None => out.push(eval_dim(dim, dims)?),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_and_runs_evaluate_from_bound_shapes() {
        let mut d = Dims::default();
        d.bind(&["rows…", "n"], &[2, 3, 8]);
        d.bind(&["Hk", "Dk"], &[2, 64]);
        d.bind(&["Hv", "Dv"], &[4, 16]);
        assert_eq!(eval_shape(&["rows…", "n"], &d), Ok(vec![2, 3, 8]));
        assert_eq!(
            eval_shape(&["2·Hk·Dk + Hv·Dv", "Dk - 1"], &d),
            Ok(vec![2 * 2 * 64 + 4 * 16, 63])
        );
        assert!(eval_shape(&["M"], &d).is_err());
    }

    #[test]
    fn a_tensor_of_another_rank_binds_nothing() {
        let mut d = Dims::default();
        d.bind(&["a", "b"], &[1, 2, 3]);
        assert_eq!(d.get("a"), None);
        d.bind(&["a", "b"], &[5, 6]);
        d.bind(&["a", "b"], &[7, 8]);
        assert_eq!((d.get("a"), d.get("b")), (Some(5), Some(6)));
    }
}
