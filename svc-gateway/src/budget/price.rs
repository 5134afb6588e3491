//! A model's price, as the registry file gives it, held as integers.

/// Largest price accepted, in US dollars per million tokens: far above any real model, and
/// small enough that a cost in micro-dollars never overflows.
pub const MAX_DOLLARS_PER_MILLION: f64 = 1_000_000.0;

/// The fixed price of the mock provider's models in dev mode, so budgets can be tried there:
/// $1 per million input tokens, $2 per million output tokens.
pub const MOCK_PRICE: Price = Price {
    input: 1_000_000,
    output: 2_000_000,
    cached_input: 1_000_000,
};

/// One model's price, in micro-dollars per million tokens (`2.50` dollars is `2_500_000`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    /// Per million prompt (input) tokens.
    pub input: u64,
    /// Per million completion (output) tokens.
    pub output: u64,
    /// Per million prompt tokens the provider served from its cache.
    pub cached_input: u64,
}

impl Price {
    /// The price given in dollars per million tokens; `cached_input` defaults to `input`.
    /// A negative, non-finite or absurd amount is refused, naming the field.
    pub fn from_dollars(
        input: f64,
        output: f64,
        cached_input: Option<f64>,
    ) -> Result<Price, String> {
        let micros = |field: &str, dollars: f64| {
            if !dollars.is_finite() || dollars < 0.0 {
                return Err(format!(
                    "price.{field}: {dollars} is not a non-negative amount"
                ));
            }
            if dollars > MAX_DOLLARS_PER_MILLION {
                return Err(format!(
                    "price.{field}: {dollars} is more than {MAX_DOLLARS_PER_MILLION} dollars per million tokens"
                ));
            }
            // In range and non-negative: the cast neither saturates nor wraps.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Ok((dollars * 1_000_000.0).round() as u64)
        };
        let input = micros("input", input)?;
        Ok(Price {
            input,
            output: micros("output", output)?,
            cached_input: match cached_input {
                Some(dollars) => micros("cached_input", dollars)?,
                None => input,
            },
        })
    }

    /// The cost in micro-dollars of `prompt` input tokens (of which `cached` came from the
    /// provider's cache) and `completion` output tokens, rounded up to a whole micro-dollar.
    pub fn cost(&self, prompt: u64, cached: u64, completion: u64) -> i64 {
        let cached = cached.min(prompt);
        let nanos_per_token =
            |tokens: u64, per_million: u64| u128::from(tokens) * u128::from(per_million);
        let total = nanos_per_token(prompt - cached, self.input)
            + nanos_per_token(cached, self.cached_input)
            + nanos_per_token(completion, self.output);
        i64::try_from(total.div_ceil(1_000_000)).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_become_micros_and_cached_input_defaults_to_input() {
        let price = Price::from_dollars(2.5, 10.0, None).unwrap();
        assert_eq!(
            price,
            Price {
                input: 2_500_000,
                output: 10_000_000,
                cached_input: 2_500_000
            }
        );
        let price = Price::from_dollars(2.5, 10.0, Some(1.25)).unwrap();
        assert_eq!(price.cached_input, 1_250_000);
        assert_eq!(
            Price::from_dollars(0.0, 0.0, None)
                .unwrap()
                .cost(1000, 0, 1000),
            0
        );
    }

    #[test]
    fn negative_or_absurd_prices_name_their_field() {
        let error = Price::from_dollars(-1.0, 1.0, None).unwrap_err();
        assert!(error.starts_with("price.input:"), "{error}");
        let error = Price::from_dollars(1.0, f64::NAN, None).unwrap_err();
        assert!(error.starts_with("price.output:"), "{error}");
        let error = Price::from_dollars(1.0, 1.0, Some(1e12)).unwrap_err();
        assert!(error.starts_with("price.cached_input:"), "{error}");
    }

    #[test]
    fn cost_is_whole_micro_dollars_rounded_up() {
        let price = Price::from_dollars(2.5, 10.0, Some(1.25)).unwrap();
        // 1000 input at $2.50/M = 2500 µ$, 500 output at $10/M = 5000 µ$.
        assert_eq!(price.cost(1000, 0, 500), 7500);
        // 400 of the 1000 cached at $1.25/M: 600 * 2.5 + 400 * 1.25 = 2000 µ$.
        assert_eq!(price.cost(1000, 400, 0), 2000);
        // One token at $2.50/M is 2.5 µ$: rounded up.
        assert_eq!(price.cost(1, 0, 0), 3);
        // More cached than prompt is the prompt.
        assert_eq!(price.cost(10, 99, 0), price.cost(10, 10, 0));
        assert_eq!(MOCK_PRICE.cost(1_000_000, 0, 1_000_000), 3_000_000);
        let huge = Price::from_dollars(MAX_DOLLARS_PER_MILLION, 0.0, None).unwrap();
        assert_eq!(huge.cost(u64::MAX, 0, 0), i64::MAX);
    }
}
