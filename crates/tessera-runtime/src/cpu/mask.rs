//! Active-lane masks: either every lane of the threadgroup, or a sorted list of lanes.

/// The lanes an instruction runs on.
#[derive(Debug, Default)]
pub(crate) struct Mask {
    /// Every lane `0..n` is active (`lanes` is then unused).
    pub full: bool,
    /// The active lanes in ascending order when not `full`.
    pub lanes: Vec<u32>,
}

impl Mask {
    pub fn full() -> Mask {
        Mask {
            full: true,
            lanes: Vec::new(),
        }
    }

    pub fn count(&self, n: usize) -> usize {
        if self.full {
            n
        } else {
            self.lanes.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.full && self.lanes.is_empty()
    }

    /// The first lane of `0..n` that is not active, if any.
    pub fn first_inactive(&self, n: usize) -> Option<u32> {
        if self.full {
            return None;
        }
        let mut expect = 0u32;
        for &l in &self.lanes {
            if l != expect {
                return Some(expect);
            }
            expect += 1;
        }
        ((expect as usize) < n).then_some(expect)
    }

    /// The first active lane.
    pub fn first(&self) -> u32 {
        if self.full {
            0
        } else {
            self.lanes.first().copied().unwrap_or(0)
        }
    }
}

/// Runs `$body` with `$l: usize` bound to each active lane, in ascending order.
macro_rules! each_lane {
    ($mask:expr, $n:expr, |$l:ident| $body:block) => {
        if $mask.full {
            for $l in 0..$n {
                $body
            }
        } else {
            for &lane in $mask.lanes.iter() {
                let $l = lane as usize;
                $body
            }
        }
    };
}
pub(crate) use each_lane;
