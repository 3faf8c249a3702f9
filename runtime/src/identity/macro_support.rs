//! Support items for the expansion of `#[kanban_identity_gated]`; not an API.
//!
//! The default fallback of a gated function goes through [`GatedFallback`] rather than
//! `Default::default()` directly so that a return type without `Default` produces an error that
//! says what to do (add `fallback = <expr>`), spanned on the return type.

/// Implemented for every `Default` type: the value a gated function returns outside an owned
/// worker context when it names no `fallback`.
#[diagnostic::on_unimplemented(
    message = "`#[kanban_identity_gated]` has no fallback for `{Self}`: it does not implement `Default`",
    label = "outside a dispatcher-owned worker context the function must return a `{Self}`",
    note = "add `#[kanban_identity_gated(fallback = <expr>)]` with the value to return when this context owns no worker identity"
)]
pub trait GatedFallback {
    /// The fallback value.
    fn gated_fallback() -> Self;
}

impl<T: Default> GatedFallback for T {
    fn gated_fallback() -> Self {
        T::default()
    }
}

/// The default fallback of a gated function.
pub fn fallback<T: GatedFallback>() -> T {
    T::gated_fallback()
}
