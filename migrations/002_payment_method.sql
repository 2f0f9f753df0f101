-- Orders say how they are paid: from the account balance, or by card (with the card id).
ALTER TABLE orders ADD COLUMN payment_method TEXT NOT NULL DEFAULT 'ACCOUNT_BALANCE';
ALTER TABLE orders ADD COLUMN card_id TEXT;
