//! Order statistics over the runs of one case.

/// Median, minimum and maximum of a non-empty sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// Summarises `xs`; `None` for an empty sample. The median of an even count is the mean of
/// the two middle values.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Summary {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(
            summarize(&[3.0, 1.0, 2.0]).unwrap(),
            Summary {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(summarize(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert_eq!(
            summarize(&[7.0]).unwrap(),
            Summary {
                median: 7.0,
                min: 7.0,
                max: 7.0
            }
        );
        assert!(summarize(&[]).is_none());
    }
}
