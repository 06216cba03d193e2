//! [`SharedText`] as PostgreSQL `text`.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef, Postgres};

use crate::text::SharedText;

impl sqlx::Type<Postgres> for SharedText {
    fn type_info() -> PgTypeInfo {
        <&str as sqlx::Type<Postgres>>::type_info()
    }
    fn compatible(ty: &PgTypeInfo) -> bool {
        <&str as sqlx::Type<Postgres>>::compatible(ty)
    }
}

impl sqlx::Encode<'_, Postgres> for SharedText {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&str as sqlx::Encode<'_, Postgres>>::encode(self.as_str(), buf)
    }
}

impl<'r> sqlx::Decode<'r, Postgres> for SharedText {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        <&str as sqlx::Decode<'r, Postgres>>::decode(value).map(SharedText::from)
    }
}
