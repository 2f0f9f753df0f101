-- One service order belongs to one intent only: an answer naming an order the ledger already
-- holds for another intent is a mismatch for a person, never a second record of one payment.
CREATE UNIQUE INDEX orders_service_order_id ON orders(service_order_id)
    WHERE service_order_id IS NOT NULL;
