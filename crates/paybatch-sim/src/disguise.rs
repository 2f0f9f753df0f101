//! Hostile answers: a service that answers in the published shapes but says what did not
//! happen. Each is off by default and switched on by its rate (`sim serve --swap-rate`,
//! `--unlinked-rate`, `--inflated-total-rate`, `--linked-failure-rate`, `--escape-rate`), to
//! rehearse what paybatch does when the service cannot be believed:
//!
//! - **swap**: a new idempotency key is answered with an earlier order of the account (of the
//!   same items when there is one) and nothing is created; the answer is kept under the key.
//! - **unlinked**: a COMPLETED order is answered without its items' payout links.
//! - **inflated total**: a finished order's `total_price` is answered 1000 times over.
//! - **linked failure**: a FAILED order's items are answered with payout links.
//! - **escape**: a failed order's `message` and injected server errors carry terminal escape
//!   sequences (OSC 8, CSI, C1 CSI, right-to-left override).
//! - **echoed key** (`--echo-key SPELLING`): every answer's `message`, and a refusal's `help`,
//!   `details` and 429 `error`, quote the request's API key in the chosen spelling
//!   ([`KeySpelling`]), as a careless service might.
//!
//! Which orders are disguised is decided from the seed and the order's id, not drawn from the
//! run's random source: every answer about one order is disguised the same way, and switching
//! these on does not change the other draws of a seed.

use rust_decimal::Decimal;
use serde_json::Value;

use super::store::{ItemRow, OrderRow};
use paybatch_api::models::OrderStatus;

/// What an escaping service puts in its messages: an OSC 8 hyperlink, a CSI clearing the
/// screen, a C1 CSI and a right-to-left override.
pub(crate) const ESCAPES: &str =
    "\u{1b}]8;;https://evil.example/\u{7}click\u{1b}]8;;\u{7}\u{1b}[2J\u{9b}31m\u{202e}";

/// The rates of the hostile answers (each from 0 to 1, all 0 by default).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Hostile {
    pub swap_rate: f64,
    pub unlinked_rate: f64,
    pub inflated_total_rate: f64,
    pub linked_failure_rate: f64,
    pub escape_rate: f64,
    /// Quote the request's API key in its answers, spelt this way (none by default).
    pub echo_key: Option<KeySpelling>,
}

/// How an answer that quotes the API key spells it (`sim serve --echo-key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySpelling {
    /// `UPPER`: the key in capitals.
    Upper,
    /// `base64`: standard alphabet, padded.
    Base64,
    /// `base64-nopad`: standard alphabet, without padding.
    Base64NoPad,
    /// `base64url`: URL-safe alphabet, padded.
    Base64Url,
    /// `base64url-nopad`: URL-safe alphabet, without padding.
    Base64UrlNoPad,
    /// `unprefixed`: without its two-letter prefix (`xx`, `wg`).
    Unprefixed,
    /// `percent`: every byte percent-encoded (`%78%78...`).
    Percent,
    /// `all`: every spelling above, one after the other.
    All,
}

impl KeySpelling {
    /// Each spelling, `all` aside, as `--echo-key` names it.
    pub const EACH: [(&'static str, KeySpelling); 7] = [
        ("upper", KeySpelling::Upper),
        ("base64", KeySpelling::Base64),
        ("base64-nopad", KeySpelling::Base64NoPad),
        ("base64url", KeySpelling::Base64Url),
        ("base64url-nopad", KeySpelling::Base64UrlNoPad),
        ("unprefixed", KeySpelling::Unprefixed),
        ("percent", KeySpelling::Percent),
    ];

    /// `key` spelt this way.
    pub fn spell(self, key: &str) -> String {
        use base64::Engine;
        use base64::engine::general_purpose as b64;
        match self {
            KeySpelling::Upper => key.to_ascii_uppercase(),
            KeySpelling::Base64 => b64::STANDARD.encode(key),
            KeySpelling::Base64NoPad => b64::STANDARD_NO_PAD.encode(key),
            KeySpelling::Base64Url => b64::URL_SAFE.encode(key),
            KeySpelling::Base64UrlNoPad => b64::URL_SAFE_NO_PAD.encode(key),
            KeySpelling::Unprefixed => key
                .strip_prefix("xx")
                .or_else(|| key.strip_prefix("wg"))
                .unwrap_or(key)
                .to_string(),
            KeySpelling::Percent => key.bytes().map(|b| format!("%{b:02X}")).collect(),
            KeySpelling::All => Self::EACH
                .iter()
                .map(|(_, s)| s.spell(key))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

impl std::str::FromStr for KeySpelling {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(KeySpelling::All);
        }
        Self::EACH
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, spelling)| *spelling)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::EACH.iter().map(|(n, _)| *n).collect();
                format!("`{s}` is not a spelling: {}, or all", names.join(", "))
            })
    }
}

/// Quotes `spelt` (the request's key, spelt) in the answer `body`: in its `message`, and in a
/// refusal's (`refusal`) `help`, each of its `details`' `message` and the 429 `error`. Returns
/// whether it changed anything.
pub(crate) fn echo_key(body: &mut Value, spelt: &str, refusal: bool) -> bool {
    let quote = |v: &mut Value| match v {
        Value::String(text) => {
            text.push_str(&format!(" (key {spelt})"));
            true
        }
        _ => false,
    };
    let Some(m) = body.as_object_mut() else {
        return false;
    };
    let mut changed = m.get_mut("message").is_some_and(quote);
    if refusal {
        for field in ["help", "error"] {
            changed |= m.get_mut(field).is_some_and(quote);
        }
        let details = m.get_mut("details").and_then(Value::as_array_mut);
        for detail in details.into_iter().flatten() {
            changed |= detail.get_mut("message").is_some_and(quote);
        }
    }
    changed
}

/// The kinds of disguise, each drawn on its own for an order.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Unlinked = 1,
    Inflated = 2,
    LinkedFailure = 3,
    Escape = 4,
}

impl Hostile {
    /// Whether any hostile answer is switched on.
    pub fn any(&self) -> bool {
        [
            self.swap_rate,
            self.unlinked_rate,
            self.inflated_total_rate,
            self.linked_failure_rate,
            self.escape_rate,
        ]
        .iter()
        .any(|r| *r > 0.0)
            || self.echo_key.is_some()
    }
}

/// A number in `[0, 1)` fixed by the seed, the order and the kind.
fn draw(seed: u64, order_id: &str, kind: Kind) -> f64 {
    super::faults::fixed_draw(seed, order_id, kind as u64)
}

fn chosen(seed: u64, order_id: &str, kind: Kind, rate: f64) -> bool {
    rate > 0.0 && draw(seed, order_id, kind) < rate
}

/// The escaping version of `message`.
pub(crate) fn escaped(message: &str) -> String {
    format!("{message} {ESCAPES}")
}

/// Disguises the full answer (`GET /order/{id}`, or the 200 of a sync creation) of the finished
/// order `o` as the rates choose. Returns whether it changed anything.
pub(crate) fn full_answer(h: &Hostile, seed: u64, o: &OrderRow, answer: &mut Value) -> bool {
    let mut changed = false;
    let Some(m) = answer.as_object_mut() else {
        return false;
    };
    if chosen(seed, &o.id, Kind::Inflated, h.inflated_total_rate) {
        let inflated = o.total_price * Decimal::from(1000);
        m.insert("total_price".into(), Value::String(inflated.to_string()));
        changed = true;
    }
    if o.status == OrderStatus::Failed && chosen(seed, &o.id, Kind::Escape, h.escape_rate) {
        let message = o.message.as_deref().unwrap_or("The order failed.");
        m.insert("message".into(), Value::String(escaped(message)));
        changed = true;
    }
    let Some(items) = m.get_mut("items").and_then(Value::as_array_mut) else {
        return changed;
    };
    match o.status {
        OrderStatus::Completed if chosen(seed, &o.id, Kind::Unlinked, h.unlinked_rate) => {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                item.remove("payout");
                item.remove("redemption_url");
            }
            changed = true;
        }
        OrderStatus::Failed if chosen(seed, &o.id, Kind::LinkedFailure, h.linked_failure_rate) => {
            for (item, row) in items.iter_mut().zip(&o.items) {
                if let Some(item) = item.as_object_mut() {
                    item.insert("payout".into(), payout_of(row, o));
                }
            }
            changed = true;
        }
        _ => {}
    }
    changed
}

/// The payout a failed order's item is answered with: its link, as if it were active.
fn payout_of(item: &ItemRow, o: &OrderRow) -> Value {
    serde_json::json!({
        "status": "ACTIVE",
        "status_updated_at": o.completed_at.as_deref().unwrap_or(&o.created_at),
        "url": item.payout_url,
    })
}

/// The earlier order a swapped answer stands for: among `candidates` (the account's newest
/// orders, with their items), one whose items ask for what `items` ask for, else the newest.
pub(crate) fn swap_target<'a>(
    items: &[(Value, Value, Decimal)],
    candidates: &'a [OrderRow],
) -> Option<&'a OrderRow> {
    let same = |o: &OrderRow| {
        o.items.len() == items.len()
            && o.items.iter().zip(items).all(|(it, (dm, products, fv))| {
                it.distribution_method == *dm
                    && serde_json::to_value(&it.products).ok().as_ref() == Some(products)
                    && it.face_value == *fv
            })
    };
    candidates
        .iter()
        .find(|o| same(o))
        .or_else(|| candidates.first())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_of_zero_disguises_nothing_and_one_everything() {
        for id in ["O-1", "O-2", "O-ABC"] {
            assert!(!chosen(7, id, Kind::Unlinked, 0.0));
            assert!(chosen(7, id, Kind::Unlinked, 1.0));
        }
    }

    #[test]
    fn the_draw_is_fixed_per_order_and_spread_between_orders() {
        let ids: Vec<String> = (0..1000).map(|i| format!("O-{i:05}")).collect();
        let hits = ids
            .iter()
            .filter(|id| chosen(3, id, Kind::Inflated, 0.3))
            .count();
        assert!((200..400).contains(&hits), "{hits} of 1000 at 0.3");
        for id in &ids {
            assert_eq!(draw(3, id, Kind::Escape), draw(3, id, Kind::Escape));
        }
    }

    #[test]
    fn an_echoed_key_is_spelt_as_asked_in_the_messages_of_an_answer() {
        let key = "xx~~~echo???keys1";
        let spelt: Vec<String> = KeySpelling::EACH
            .iter()
            .map(|(name, s)| {
                assert_eq!(name.parse::<KeySpelling>(), Ok(*s));
                s.spell(key)
            })
            .collect();
        assert_eq!(
            spelt,
            [
                "XX~~~ECHO???KEYS1",
                "eHh+fn5lY2hvPz8/a2V5czE=",
                "eHh+fn5lY2hvPz8/a2V5czE",
                "eHh-fn5lY2hvPz8_a2V5czE=",
                "eHh-fn5lY2hvPz8_a2V5czE",
                "~~~echo???keys1",
                "%78%78%7E%7E%7E%65%63%68%6F%3F%3F%3F%6B%65%79%73%31",
            ]
        );
        assert_eq!(KeySpelling::All.spell(key), spelt.join(", "));
        assert!("lower".parse::<KeySpelling>().is_err());
        let mut refusal = serde_json::json!({
            "type": "validation_error", "message": "m", "help": "h",
            "details": [{"message": "d", "location": ["items"]}],
        });
        assert!(echo_key(&mut refusal, "K", true));
        assert_eq!(refusal["message"], "m (key K)");
        assert_eq!(refusal["help"], "h (key K)");
        assert_eq!(refusal["details"][0]["message"], "d (key K)");
        let mut failed =
            serde_json::json!({"id": "o", "status": "FAILED", "message": "m", "help": "h"});
        assert!(echo_key(&mut failed, "K", false));
        assert_eq!(
            failed["help"], "h",
            "only the message of an answer that is no refusal"
        );
        assert!(!echo_key(&mut serde_json::json!({"id": "o"}), "K", false));
    }
}
