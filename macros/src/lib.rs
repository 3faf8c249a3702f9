//! `#[kanban_identity_gated]`: the attribute every function that turns worker identity into
//! behaviour carries. It is the only way code outside `kanban_runtime::identity` obtains a
//! `&WorkerIdentity`.
//!
//! ```
//! use kanban_runtime::identity::{self, WorkerIdentity, kanban_identity_gated};
//!
//! #[kanban_identity_gated(fallback = explicit.map(str::to_owned))]
//! pub fn default_task_id(identity: &WorkerIdentity, explicit: Option<&str>) -> Option<String> {
//!     Some(explicit.map_or_else(|| identity.task.clone(), str::to_owned))
//! }
//!
//! // Callers never pass the identity. Inside a non-owned scope only an explicit id survives.
//! let _cron_job = identity::non_dispatcher_owned_context();
//! assert_eq!(default_task_id(None), None);
//! assert_eq!(default_task_id(Some("t_1")).as_deref(), Some("t_1"));
//! ```
//!
//! The macro removes the leading `&WorkerIdentity` parameter (the first one after a receiver) from
//! the signature and wraps the body in
//! `match ::kanban_runtime::identity::gate() { Some(id) => { let <param> = &id; <body> } None => <fallback> }`,
//! so the body runs only in a dispatcher-owned context with identity present, and every call asks
//! the gate afresh (a verdict is never memoized). Without `fallback = <expr>` the fallback is the
//! return type's `Default`; a return type without `Default` is a compile error (raised through a
//! trait with `#[diagnostic::on_unimplemented]` in the runtime, spanned on the return type) that
//! tells the author to add a fallback. That is sounder than a syntactic allow-list of return
//! types: it accepts every `Default` type, aliases and generics included, and rejects the rest.
//!
//! The crate is split by phase: [`parse`] reads the attribute arguments, [`validate`] turns the
//! item into a checked [`validate::GatedFn`], [`expand`] emits the wrapped function. Every misuse is
//! a `syn::Error` spanned on the offending tokens whose message says what to do; on error the
//! original item is emitted next to the error (tokio-macros' approach) so that one mistake gives
//! one error and IDEs keep working.
//!
//! Not supported, each with its own error: items other than `fn`; `async fn` (the ownership
//! context is per thread, a future may move between threads); `const fn` (the gate reads the
//! environment); an identity parameter that is missing, not first, taken by value, `&mut` or with
//! a named lifetime (the identity lives only for the call).

use proc_macro::TokenStream;

mod expand;
mod parse;
mod validate;

/// Gates a function on the dispatcher-owned worker identity. See the crate documentation.
#[proc_macro_attribute]
pub fn kanban_identity_gated(attr: TokenStream, item: TokenStream) -> TokenStream {
    let original: proc_macro2::TokenStream = item.clone().into();
    let result = parse::parse_args(attr.into())
        .and_then(|args| validate::validate(args, item.into()))
        .map(expand::expand);
    match result {
        Ok(tokens) => tokens.into(),
        Err(err) => {
            let mut out = err.to_compile_error();
            out.extend(original);
            out.into()
        }
    }
}
