-- What the paying balance (or card) was charged for each completed row: the item's price when
-- the order is in the row's currency; for an order of one item converted by the service
-- (embedded FX), the order's price in the payment currency.
ALTER TABLE rows ADD COLUMN debited_amount TEXT;
ALTER TABLE rows ADD COLUMN debited_currency TEXT;
