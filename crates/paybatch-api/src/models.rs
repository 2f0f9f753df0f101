//! Wire models: plain data mirroring the interface document, one type per shape a status code can
//! return. Unknown extra fields are tolerated; fields the document does not promise are `Option`.
//! The simulator, `paybatch-sim`, serves these same types.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::decimal::{exact_number, flexible, flexible_opt};

/// The dated API version paybatch pins.
pub const API_VERSION: &str = "2024-02-05";
/// The older dated version the service still knows.
pub const API_VERSION_2023: &str = "2023-07-27";

// ---------------------------------------------------------------------------------------------
// Pagination

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pagination {
    #[serde(default)]
    pub cursors: Cursors,
    #[serde(default)]
    pub page: Page,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursors {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    #[serde(default)]
    pub limit: u32,
}

// ---------------------------------------------------------------------------------------------
// Catalog

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayoutType {
    GiftCard,
    Subscription,
    Payment,
    /// A payout type this version of paybatch does not know (the service adds types within a
    /// dated version): listed, never payable.
    #[serde(other)]
    Other,
}

impl PayoutType {
    pub fn as_str(self) -> &'static str {
        match self {
            PayoutType::GiftCard => "gift_card",
            PayoutType::Subscription => "subscription",
            PayoutType::Payment => "payment",
            PayoutType::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Product {
    pub name: String,
    pub code: String,
    pub currency: String,
    pub state: String,
    pub is_orderable: bool,
    pub payout_type: PayoutType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<String>>,
    #[serde(default)]
    pub countries_redeemable_in: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_service: Option<CustomerService>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub discount_multiplier: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gift_card: Option<GiftCard>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription: Option<Subscription>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment: Option<Payment>,
    /// Present since 2024-02-05; its type is not shown by the interface, so it is kept as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_state: Option<serde_json::Value>,
}

impl Product {
    /// The denominations of the object that matches `payout_type` (subscriptions have none).
    pub fn denominations(&self) -> Option<&Denominations> {
        match self.payout_type {
            PayoutType::GiftCard => self
                .gift_card
                .as_ref()
                .and_then(|g| g.denominations.as_ref()),
            PayoutType::Payment => self.payment.as_ref().and_then(|p| p.denominations.as_ref()),
            PayoutType::Subscription | PayoutType::Other => None,
        }
    }

    /// The subscription plans, for subscription products.
    pub fn subscription_plans(&self) -> &[SubscriptionPlan] {
        match (&self.payout_type, &self.subscription) {
            (PayoutType::Subscription, Some(s)) => &s.subscription_plans,
            _ => &[],
        }
    }

    /// `discount_multiplier`, or zero when absent.
    pub fn discount(&self) -> Decimal {
        self.discount_multiplier.unwrap_or(Decimal::ZERO)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerService {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_image_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_image_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_color: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentResources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description_markdown_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disclaimer_markdown_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refund_policy_markdown_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reissuance_policy_markdown_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms_buyer_markdown_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms_consumer_markdown_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redemption_instructions_markdown_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_months: Option<i64>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Denominations {
    /// e.g. `fixed` or `open`; the allowed values are not shown by the interface.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub minimum_value: Option<Decimal>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub maximum_value: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_list: Option<Vec<DecimalString>>,
}

/// A decimal carried as a string in a list (`available_list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecimalString(#[serde(with = "flexible")] pub Decimal);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GiftCard {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assets: Option<Assets>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance_check_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_resources: Option<ContentResources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<Expiry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeemable_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barcode_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_code_usage_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denominations: Option<Denominations>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assets: Option<Assets>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance_check_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_resources: Option<ContentResources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<Expiry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeemable_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barcode_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_code_usage_type: Option<String>,
    #[serde(default)]
    pub subscription_plans: Vec<SubscriptionPlan>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionPlan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(with = "flexible")]
    pub price: Decimal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_plan_code: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Payment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assets: Option<Assets>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denominations: Option<Denominations>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_resources: Option<ContentResources>,
}

/// `GET /product` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProductList {
    pub catalog: Vec<Product>,
    #[serde(default)]
    pub pagination: Pagination,
}

// ---------------------------------------------------------------------------------------------
// Orders

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    Processing,
    Completed,
    Failed,
    /// A status the interface does not list: treated as not yet terminal.
    #[serde(other)]
    Unknown,
}

impl OrderStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, OrderStatus::Completed | OrderStatus::Failed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Processing => "PROCESSING",
            OrderStatus::Completed => "COMPLETED",
            OrderStatus::Failed => "FAILED",
            OrderStatus::Unknown => "UNKNOWN",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PaymentMethodType {
    AccountBalance,
    Card,
    /// A payment method type paybatch does not know (read in answers only; never sent).
    #[serde(other)]
    Other,
}

impl PaymentMethodType {
    /// Its name in the interface (`OTHER` for one paybatch does not know).
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentMethodType::AccountBalance => "ACCOUNT_BALANCE",
            PaymentMethodType::Card => "CARD",
            PaymentMethodType::Other => "OTHER",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentMethod {
    #[serde(rename = "type")]
    pub kind: PaymentMethodType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DistributionType {
    Email,
    PayoutLink,
    /// A distribution type paybatch never sends (`RECIPIENT`, or one added later): read in
    /// answers as "other".
    #[serde(other)]
    Other,
}

impl DistributionType {
    pub fn as_str(self) -> &'static str {
        match self {
            DistributionType::Email => "EMAIL",
            DistributionType::PayoutLink => "PAYOUT_LINK",
            DistributionType::Other => "OTHER",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistributionMethod {
    #[serde(rename = "type")]
    pub kind: DistributionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SelectionType {
    Single,
    Multiple,
    /// A selection paybatch never sends (`TEMPLATE`, or one added later): read in answers as
    /// "other".
    #[serde(other)]
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProductSelection {
    #[serde(rename = "type")]
    pub kind: SelectionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

impl ProductSelection {
    /// One code is `SINGLE`; several are `MULTIPLE` (the recipient chooses).
    pub fn of(codes: &[String]) -> Self {
        match codes {
            [one] => ProductSelection {
                kind: SelectionType::Single,
                value: Some(one.clone()),
                values: None,
            },
            many => ProductSelection {
                kind: SelectionType::Multiple,
                value: None,
                values: Some(many.to_vec()),
            },
        }
    }

    /// The product codes named, whichever field carries them.
    pub fn codes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(v) = &self.value {
            out.push(v.clone());
        }
        if let Some(vs) = &self.values {
            out.extend(vs.iter().cloned());
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payout {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_updated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_date: Option<String>,
}

/// One item of a full order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub distribution_method: DistributionMethod,
    pub products: ProductSelection,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub face_value: Option<Decimal>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub price: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub discount_multiplier: Option<Decimal>,
    /// Since 2024-02-05.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payout: Option<Payout>,
    /// In 2023-07-27 (deprecated there, removed in 2024-02-05).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redemption_url: Option<String>,
}

impl OrderItem {
    /// The payout link, in either dated version's shape.
    pub fn payout_url(&self) -> Option<&str> {
        self.payout
            .as_ref()
            .and_then(|p| p.url.as_deref())
            .or(self.redemption_url.as_deref())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransactionDetail {
    #[serde(with = "flexible")]
    pub value: Decimal,
    #[serde(default)]
    pub fx: Option<serde_json::Value>,
}

/// A full order (`COMPLETED` or `FAILED`, or the 200 answer of a sync creation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub id: String,
    pub status: OrderStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_method: Option<PaymentMethod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_price: Option<Decimal>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_discount: Option<Decimal>,
    #[serde(default)]
    pub items: Vec<OrderItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_detail: Option<BTreeMap<String, TransactionDetail>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Present on some failed orders: why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// An order still `PROCESSING`: the partial shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialOrder {
    pub id: String,
    pub status: OrderStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The 202 answer of an asynchronous creation: only the id and the status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptedOrder {
    pub id: String,
    pub status: OrderStatus,
}

/// `GET /order/{id}`, read by its `status`: the partial shape while processing, else full.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderView {
    Processing(PartialOrder),
    Done(Box<Order>),
}

impl OrderView {
    pub fn id(&self) -> &str {
        match self {
            OrderView::Processing(p) => &p.id,
            OrderView::Done(o) => &o.id,
        }
    }

    pub fn status(&self) -> OrderStatus {
        match self {
            OrderView::Processing(p) => p.status,
            OrderView::Done(o) => o.status,
        }
    }

    /// Reads an order body: `status` first, then the shape it announces.
    pub fn from_json(body: &[u8]) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        struct StatusOnly {
            status: OrderStatus,
        }
        let probe: StatusOnly = serde_json::from_slice(body)?;
        if probe.status.is_terminal() {
            Ok(OrderView::Done(Box::new(serde_json::from_slice(body)?)))
        } else {
            Ok(OrderView::Processing(serde_json::from_slice(body)?))
        }
    }
}

/// Element of `GET /order`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderSummary {
    pub id: String,
    pub status: OrderStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_method: Option<PaymentMethod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_price: Option<Decimal>,
    #[serde(
        default,
        with = "flexible_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_discount: Option<Decimal>,
    /// Not promised by the interface for the list; read when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderList {
    pub items: Vec<OrderSummary>,
    #[serde(default)]
    pub pagination: Pagination,
}

/// One item of a `POST /order` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewOrderItem {
    #[serde(with = "exact_number")]
    pub face_value: Decimal,
    pub distribution_method: DistributionMethod,
    pub products: ProductSelection,
}

/// The `POST /order` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewOrder {
    pub payment_method: PaymentMethod,
    pub items: Vec<NewOrderItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// `X-Execution-Mode` of order creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionMode {
    Sync,
    #[default]
    Async,
}

impl ExecutionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionMode::Sync => "sync",
            ExecutionMode::Async => "async",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Balance, ping, errors

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Balance {
    #[serde(with = "flexible")]
    pub balance: Decimal,
    pub currency: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    pub message: String,
}

/// The error body of every 4xx and 5xx answer: `help` may be `null` or absent (it is `null` in
/// the published example of a validation error); `details` (422) is a list of
/// `{type, message, location}` in the published contract, an object in older answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub message: String,
    #[serde(default)]
    pub help: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// Longest list of validation details shown to a person (the rest are counted).
const DETAILS_SHOWN: usize = 5;

impl ErrorBody {
    /// What `details` says, one entry a line: `location: message` (the published list), or
    /// `field: message` (an object of field paths).
    pub fn detail_lines(&self) -> Vec<String> {
        use serde_json::Value;
        fn text(v: &Value) -> String {
            match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            }
        }
        fn location(v: Option<&Value>) -> String {
            match v {
                Some(Value::Array(parts)) => parts
                    .iter()
                    .map(|p| match p {
                        Value::Number(n) => format!("[{n}]"),
                        other => format!(".{}", text(other)),
                    })
                    .collect::<String>()
                    .trim_start_matches('.')
                    .to_string(),
                Some(v) => text(v),
                None => String::new(),
            }
        }
        match &self.details {
            Some(Value::Array(entries)) => entries
                .iter()
                .map(|e| {
                    let place = location(e.get("location"));
                    let message = e.get("message").map(text).unwrap_or_else(|| text(e));
                    if place.is_empty() {
                        message
                    } else {
                        format!("{place}: {message}")
                    }
                })
                .collect(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(field, message)| format!("{field}: {}", text(message)))
                .collect(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => vec![text(other)],
        }
    }

    /// Message, help and details on one line, for a person.
    pub fn describe(&self) -> String {
        let mut out = self.message.clone();
        if let Some(help) = self.help.as_deref().filter(|h| !h.trim().is_empty()) {
            out.push_str(&format!(" ({help})"));
        }
        let lines = self.detail_lines();
        if !lines.is_empty() {
            let shown: Vec<&str> = lines
                .iter()
                .take(DETAILS_SHOWN)
                .map(String::as_str)
                .collect();
            out.push_str(&format!(" [{}", shown.join("; ")));
            if lines.len() > DETAILS_SHOWN {
                out.push_str(&format!("; and {} more", lines.len() - DETAILS_SHOWN));
            }
            out.push(']');
        }
        out
    }
}

/// A string that may be `null` in an answer: read as empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A record of the country listing (fields not shown by the interface: kept open).
pub type Country = serde_json::Value;
/// A record of the category listing (fields not shown by the interface: kept open).
pub type Category = serde_json::Value;

/// Normalises an error `type`: the interface writes kebab-case (`not-found`), the service's
/// reference snake_case (`not_found`). paybatch compares the snake_case form.
pub fn normalize_error_type(kind: &str) -> String {
    kind.trim().to_ascii_lowercase().replace('-', "_")
}
