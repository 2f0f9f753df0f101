//! The catalog by product code, and the catalog code close to a code it does not have ("did you
//! mean").

use std::collections::HashMap;

use crate::api::Product;

/// The catalog, by product code.
#[derive(Debug, Clone, Default)]
pub struct CatalogIndex {
    by_code: HashMap<String, Product>,
}

impl CatalogIndex {
    /// Indexes products by code (the first of two with the same code wins).
    pub fn new(products: Vec<Product>) -> Self {
        let mut by_code = HashMap::with_capacity(products.len());
        for p in products {
            by_code.entry(p.code.clone()).or_insert(p);
        }
        CatalogIndex { by_code }
    }

    pub fn get(&self, code: &str) -> Option<&Product> {
        self.by_code.get(code)
    }

    pub fn len(&self) -> usize {
        self.by_code.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_code.is_empty()
    }

    /// A catalog code close to `code` (same letters in another case, or a small typo).
    pub fn suggest(&self, code: &str) -> Option<&str> {
        let upper = code.to_uppercase();
        let mut best: Option<(usize, &str)> = None;
        for known in self.by_code.keys() {
            let d = if known.to_uppercase() == upper {
                0
            } else {
                crate::text::distance_within(&upper, &known.to_uppercase(), 2).unwrap_or(usize::MAX)
            };
            let better = match best {
                None => true,
                Some((bd, bk)) => d < bd || (d == bd && known.as_str() < bk),
            };
            if d <= 2 && better {
                best = Some((d, known));
            }
        }
        best.map(|(_, k)| k)
    }
}
