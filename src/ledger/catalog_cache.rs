//! The catalog cache: the products of an environment as last fetched, kept in the ledger.

use rusqlite::{OptionalExtension, params};

use super::{Ledger, Result, begin, commit, exec, now, sqlerr};

impl Ledger {
    /// The cached catalog of an environment and when it was fetched.
    pub fn cached_catalog(&self, environment: &str) -> Result<Option<(String, Vec<String>)>> {
        let fetched: Option<String> = self
            .conn
            .query_row(
                "SELECT fetched_at FROM catalog_syncs WHERE environment = ?1",
                [environment],
                |r| r.get("fetched_at"),
            )
            .optional()
            .map_err(sqlerr(&self.path))?;
        let Some(fetched_at) = fetched else {
            return Ok(None);
        };
        let products = self.select_all(
            "SELECT product FROM catalog_products WHERE environment = ?1 ORDER BY code",
            [environment],
            |r| r.get::<_, String>("product"),
        )?;
        Ok(Some((fetched_at, products)))
    }

    /// Replaces the cached catalog of an environment: (code, product JSON) pairs.
    pub fn store_catalog(
        &mut self,
        environment: &str,
        products: &[(String, String)],
    ) -> Result<()> {
        let tx = begin(&mut self.conn, &self.path)?;
        exec(
            &tx,
            &self.path,
            "DELETE FROM catalog_products WHERE environment = ?1",
            [environment],
        )?;
        {
            let mut stmt = tx
                .prepare(
                    "INSERT OR REPLACE INTO catalog_products (environment, code, product)
                     VALUES (?1, ?2, ?3)",
                )
                .map_err(sqlerr(&self.path))?;
            for (code, json) in products {
                stmt.execute(params![environment, code, json])
                    .map_err(sqlerr(&self.path))?;
            }
        }
        exec(
            &tx,
            &self.path,
            "INSERT OR REPLACE INTO catalog_syncs (environment, fetched_at, products)
             VALUES (?1, ?2, ?3)",
            params![environment, now(), products.len() as i64],
        )?;
        commit(tx, &self.path)
    }
}
