//! Query strings and pagination of the listings: the parameters an endpoint declares, `limit`,
//! the `after`/`before` cursors and the page they select.

use paybatch_api::models::{Cursors, Page, Pagination};

use super::answers::{Answered, bad_request, pagination_error};

const MAX_PAGE_SIZE: u32 = 500;

pub(super) struct Query(Vec<(String, String)>);

impl Query {
    /// The parameters of a query string that the endpoint knows (`allowed`); others are
    /// ignored, as parameters the published contract does not declare.
    pub(super) fn parse(raw: Option<&str>, allowed: &[&str]) -> Query {
        Query(
            url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .filter(|(k, _)| allowed.contains(&k.as_ref()))
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub(super) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub(super) fn one(&self, name: &str) -> Answered<Option<&str>> {
        match self.all(name).as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(bad_request(format!(
                "The query parameter `{name}` may be given once."
            ))),
        }
    }

    pub(super) fn limit(&self, default: u32) -> Answered<u32> {
        match self.all("limit").as_slice() {
            [] => Ok(default),
            [text] => match text.parse::<u32>() {
                Ok(n) if (1..=MAX_PAGE_SIZE).contains(&n) => Ok(n),
                _ => Err(pagination_error(format!(
                    "`limit` must be an integer from 1 to {MAX_PAGE_SIZE}, found `{text}`."
                ))),
            },
            _ => Err(pagination_error(
                "The query parameter `limit` may be given once.",
            )),
        }
    }

    /// `after` / `before`, decoded with the cursor prefix of the listing.
    pub(super) fn position(&self, prefix: &str) -> Answered<Position> {
        let after = self.all("after");
        let before = self.all("before");
        if !after.is_empty() && !before.is_empty() {
            return Err(pagination_error(
                "`after` and `before` cannot be used in the same request.",
            ));
        }
        if after.len() > 1 || before.len() > 1 {
            return Err(pagination_error("A cursor may be given once."));
        }
        let decode = |cursor: &str| -> Answered<String> {
            cursor
                .strip_prefix(prefix)
                .and_then(|h| hex::decode(h).ok())
                .and_then(|b| String::from_utf8(b).ok())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    pagination_error(format!("`{cursor}` is not a cursor of this listing."))
                })
        };
        match (after.first(), before.first()) {
            (Some(a), _) => Ok(Position::After(decode(a)?)),
            (_, Some(b)) => Ok(Position::Before(decode(b)?)),
            _ => Ok(Position::Start),
        }
    }
}

pub(super) fn cursor(prefix: &str, key: &str) -> String {
    format!("{prefix}{}", hex::encode(key.as_bytes()))
}

pub(super) enum Position {
    Start,
    After(String),
    Before(String),
}

/// One page of `all` (in display order, where `precedes(a, b)` says that key `a` comes before
/// key `b`): the items, and the keys for the `before` and `after` cursors when there is more.
pub(super) fn paginate<T, K>(
    all: Vec<T>,
    key: impl Fn(&T) -> K,
    position: Option<K>,
    backwards: bool,
    limit: usize,
    precedes: impl Fn(&K, &K) -> bool,
) -> (Vec<T>, Option<K>, Option<K>) {
    let len = all.len();
    let (start, end) = match (position, backwards) {
        (None, _) => (0, limit.min(len)),
        (Some(k), false) => {
            let s = all
                .iter()
                .position(|t| precedes(&k, &key(t)))
                .unwrap_or(len);
            (s, (s + limit).min(len))
        }
        (Some(k), true) => {
            let e = all
                .iter()
                .position(|t| !precedes(&key(t), &k))
                .unwrap_or(len);
            (e.saturating_sub(limit), e)
        }
    };
    let before = (start > 0 && start < end).then(|| key(&all[start]));
    let after = (end < len && start < end).then(|| key(&all[end - 1]));
    let items = all.into_iter().skip(start).take(end - start).collect();
    (items, before, after)
}

pub(super) fn pagination(limit: u32, before: Option<String>, after: Option<String>) -> Pagination {
    Pagination {
        cursors: Cursors { after, before },
        page: Page { limit },
    }
}

/// Whether `text` is `len` capital ASCII letters (an ISO country or currency code).
pub(super) fn valid_code(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::products::PRODUCT_CURSOR;

    #[test]
    fn pages_forward_and_back() {
        let all: Vec<i32> = (1..=7).collect();
        let asc = |a: &i32, b: &i32| a < b;
        let (p, before, after) = paginate(all.clone(), |x| *x, None, false, 3, asc);
        assert_eq!((p, before, after), (vec![1, 2, 3], None, Some(3)));
        let (p, before, after) = paginate(all.clone(), |x| *x, Some(3), false, 3, asc);
        assert_eq!((p, before, after), (vec![4, 5, 6], Some(4), Some(6)));
        let (p, before, after) = paginate(all.clone(), |x| *x, Some(6), false, 3, asc);
        assert_eq!((p, before, after), (vec![7], Some(7), None));
        let (p, before, after) = paginate(all.clone(), |x| *x, Some(4), true, 3, asc);
        assert_eq!((p, before, after), (vec![1, 2, 3], None, Some(3)));
        let desc = |a: &i32, b: &i32| a > b;
        let rev: Vec<i32> = (1..=7).rev().collect();
        let (p, _, after) = paginate(rev.clone(), |x| *x, None, false, 2, desc);
        assert_eq!((p, after), (vec![7, 6], Some(6)));
        let (p, before, _) = paginate(rev, |x| *x, Some(6), false, 2, desc);
        assert_eq!((p, before), (vec![5, 4], Some(5)));
    }

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let q = Query::parse(
            Some(&format!("after={}", cursor(PRODUCT_CURSOR, "AMZ-US"))),
            &["after", "before"],
        );
        assert!(matches!(q.position(PRODUCT_CURSOR), Ok(Position::After(k)) if k == "AMZ-US"));
        let q = Query::parse(Some("after=zzz"), &["after", "before"]);
        assert!(q.position(PRODUCT_CURSOR).is_err());
        let q = Query::parse(Some("after=pc_41&before=pc_41"), &["after", "before"]);
        assert!(q.position(PRODUCT_CURSOR).is_err());
        // Parameters the endpoint does not declare are ignored.
        let q = Query::parse(Some("nope=1&after=pc_41"), &["after"]);
        assert!(q.all("nope").is_empty());
        assert!(matches!(q.position(PRODUCT_CURSOR), Ok(Position::After(k)) if k == "A"));
    }
}
